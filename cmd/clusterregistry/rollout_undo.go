package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
)

// RolloutUndoOptions are rollout undo's arguments and flags.
type RolloutUndoOptions struct {
	ToRevision int64

	releaseTarget
}

func newRolloutUndo(f *factory) *cobra.Command {
	o := &RolloutUndoOptions{}
	cmd := &cobra.Command{
		Use:   "undo release/NAME [--to-revision N]",
		Short: "Put a Release's earlier revision back: the previous one, or --to-revision N",
		Long: `undo puts back what an earlier revision of a Release was made from (its source, target namespace,
createNamespace and drift policy; a chart a repository's version range resolved is pinned to the
version and digest that ran), as kubectl rollout undo puts a Deployment's template back. The
releases controller rolls it out as any change, in waves, and records it as the newest revision.
Without --to-revision, the revision before the current one. A source that names a ConfigMap or a
Secret names it again as it is now: undo does not bring back their contents. A revision whose
record no longer renders to its revision (the record was changed after the releases controller
wrote it, or such a ConfigMap or Secret changed) is refused.`,
		Example: `  # Back to the previous revision
  clusterregistry rollout undo release/web -n fleet

  # Back to revision 3 of rollout history
  clusterregistry rollout undo release/web -n fleet --to-revision 3`,
		Args:              usageArgs(cobra.RangeArgs(1, 2)),
		RunE:              runOptions(f, o),
		ValidArgsFunction: rolloutCompletion(f),
	}
	cmd.Flags().Int64Var(&o.ToRevision, "to-revision", 0, "the revision to put back; 0 is the one before the current")
	return cmd
}

// Validate refuses a negative revision.
func (o *RolloutUndoOptions) Validate() error {
	if o.ToRevision < 0 {
		return usageError{fmt.Errorf("--to-revision %d: want 0 (the previous) or more", o.ToRevision)}
	}
	return nil
}

// Run puts the revision back.
func (o *RolloutUndoOptions) Run(ctx context.Context) error {
	reg, rel, err := o.release(ctx)
	if err != nil {
		return err
	}
	history, err := delivery.History(ctx, reg.Kube, rel)
	if err != nil {
		return err
	}
	to, err := undoTarget(history, rel.Status.Revision, o.ToRevision)
	if err != nil {
		return fmt.Errorf("release %s/%s: %w", reg.Namespace, o.name, err)
	}
	// A record is put back only if it renders to its revision: whoever may write
	// ControllerRevisions in the cluster set could have changed it.
	undone := delivery.Undo(rel, to)
	in, err := delivery.ReadInputs(ctx, reg.Kube, nil, undone)
	if err != nil {
		return fmt.Errorf("release %s/%s: revision %d: %w", reg.Namespace, o.name, to.Number, err)
	}
	if err := delivery.VerifyUndo(undone, to, in); err != nil {
		return fmt.Errorf("release %s/%s: %w", reg.Namespace, o.name, err)
	}
	skipped := false
	err = updateRelease(ctx, reg, o.name, func(cur *v1alpha1.Release) (bool, error) {
		undone := delivery.Undo(cur, to)
		if apiequality.Semantic.DeepEqual(undone.Spec, cur.Spec) {
			skipped = true
			return false, nil
		}
		*cur = *undone
		return true, nil
	})
	if err != nil {
		return err
	}
	if skipped {
		fmt.Fprintf(o.out, "%s skipped rollback (its spec already is revision %d's)\n", releaseRef(o.name), to.Number)
		return nil
	}
	fmt.Fprintf(o.out, "%s rolled back to revision %d (%s)\n", releaseRef(o.name), to.Number, to.Hash)
	return nil
}

// undoTarget is the revision to put back: number n of history, or with n 0 the newest that is
// not the current revision.
func undoTarget(history []delivery.Revision, current string, n int64) (delivery.Revision, error) {
	for i := len(history) - 1; i >= 0; i-- {
		h := history[i]
		if (n == 0 && h.Hash != current) || (n > 0 && h.Number == n) {
			return h, nil
		}
	}
	if n == 0 {
		return delivery.Revision{}, fmt.Errorf("no revision before the current one in its history (%d recorded)", len(history))
	}
	numbers := make([]string, 0, len(history))
	for _, h := range history {
		numbers = append(numbers, strconv.FormatInt(h.Number, 10))
	}
	// A revision put back becomes the newest under a new number, and its old number goes: say
	// which numbers there are, so the next try is not another guess.
	return delivery.Revision{}, fmt.Errorf("unable to find revision %d in its history; it has revisions %s (rollout history lists them)", n, strings.Join(numbers, ", "))
}
