package rollout

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
)

// Undone is what Undo did: the revision it put back, or Skipped when the Release's spec already
// was that revision's.
type Undone struct {
	To      delivery.Revision
	Skipped bool
}

// Undo puts back what an earlier revision of the Release was made from (delivery.Undo), as
// kubectl rollout undo puts a Deployment's template back: revision toRevision of its history,
// or with 0 the newest before the current one. kube reads the history (ControllerRevisions) and
// what the revision's source names. A record that no longer renders to its revision is refused:
// whoever may write ControllerRevisions in the cluster set could have changed it.
func Undo(ctx context.Context, releases Releases, kube kubernetes.Interface, namespace, name string, toRevision int64) (Undone, error) {
	if toRevision < 0 {
		return Undone{}, &InvalidError{Message: fmt.Sprintf("revision %d: want 0 (the previous) or more", toRevision)}
	}
	rel, err := releases.Releases(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Undone{}, fmt.Errorf("release %s/%s: %w", namespace, name, err)
	}
	history, err := delivery.History(ctx, kube, rel)
	if err != nil {
		return Undone{}, err
	}
	to, err := Target(history, rel.Status.Revision, toRevision)
	if err != nil {
		return Undone{}, fmt.Errorf("release %s/%s: %w", rel.Namespace, name, err)
	}
	undone := delivery.Undo(rel, to)
	in, err := delivery.ReadInputs(ctx, kube, nil, undone)
	if err != nil {
		return Undone{}, fmt.Errorf("release %s/%s: revision %d: %w", rel.Namespace, name, to.Number, err)
	}
	if err := delivery.VerifyUndo(undone, to, in); err != nil {
		return Undone{}, fmt.Errorf("release %s/%s: %w", rel.Namespace, name, err)
	}
	out := Undone{To: to}
	err = update(ctx, releases, namespace, name, func(cur *v1alpha1.Release) (bool, error) {
		undone := delivery.Undo(cur, to)
		if apiequality.Semantic.DeepEqual(undone.Spec, cur.Spec) {
			out.Skipped = true
			return false, nil
		}
		*cur = *undone
		return true, nil
	})
	return out, err
}

// Target is the revision Undo puts back: number n of history, or with n 0 the newest that is
// not current. A number history does not hold is an *InvalidError that lists those it does.
func Target(history []delivery.Revision, current string, n int64) (delivery.Revision, error) {
	for i := len(history) - 1; i >= 0; i-- {
		h := history[i]
		if (n == 0 && h.Hash != current) || (n > 0 && h.Number == n) {
			return h, nil
		}
	}
	if n == 0 {
		return delivery.Revision{}, &RefusedError{Message: fmt.Sprintf("no revision before the current one in its history (%d recorded)", len(history))}
	}
	numbers := make([]string, 0, len(history))
	for _, h := range history {
		numbers = append(numbers, strconv.FormatInt(h.Number, 10))
	}
	// A revision put back becomes the newest under a new number, and its old number goes: say
	// which numbers there are, so the next try is not another guess.
	return delivery.Revision{}, &InvalidError{Message: fmt.Sprintf("unable to find revision %d in its history; it has revisions %s (rollout history lists them)", n, strings.Join(numbers, ", "))}
}
