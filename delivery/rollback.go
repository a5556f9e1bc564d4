package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A rollout with onFailure Rollback that fails past maxFailures returns every member it moved to
// the last revision that was Ready everywhere. The failed revision's ControllerRevision records
// the rollback (RolledBackAnnotation), so that every replica, and the Controller after a restart,
// keeps delivering the good revision until the Release's spec changes.

// CompleteAnnotation, on a revision's ControllerRevision, says its rollout once had every member
// Ready: a revision a rollback may return to.
const CompleteAnnotation = "clusterregistry.k8s.io/complete"

// RolledBackAnnotation, on a failed revision's ControllerRevision, records its rollback (JSON,
// a Rollback).
const RolledBackAnnotation = "clusterregistry.k8s.io/rolled-back"

// Rollback is a failed revision's rollback, as RolledBackAnnotation records it.
type Rollback struct {
	// To is the revision returned to; Number its number in the history then.
	To     string `json:"to"`
	Number int64  `json:"number"`
	// Generation is the Release's when it rolled back: a later spec is tried again.
	Generation int64 `json:"generation"`
	// Failed are the members that failed, and Message what the rollout said.
	Failed  []string `json:"failed"`
	Message string   `json:"message"`
}

// revisionsOf are a Release's ControllerRevisions, as the Controller's cache has them.
func (c *Controller) revisionsOf(rel *v1alpha1.Release) []*appsv1.ControllerRevision {
	objs, _ := c.revisions.ByNamespace(rel.Namespace).List(labels.SelectorFromSet(labels.Set{v1alpha1.ReleaseLabel: rel.Name}))
	var out []*appsv1.ControllerRevision
	for _, o := range objs {
		if cr := o.(*appsv1.ControllerRevision); metav1.IsControlledBy(cr, rel) {
			out = append(out, cr)
		}
	}
	slices.SortFunc(out, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	return out
}

// rollingBack is, when revision b of rel was rolled back at its current generation, the target
// that delivers the good revision instead: rendered from what that revision recorded, to the
// decision's waves in reverse order (the members moved last go back first), without soak,
// approval or a failure limit; nil otherwise.
func (c *Controller) rollingBack(ctx context.Context, rel *v1alpha1.Release, b *Bundle, normal target) (*target, error) {
	var rb *Rollback
	for _, cr := range c.revisionsOf(rel) {
		if cr.Labels[v1alpha1.RevisionLabel] == b.Revision && cr.Annotations[RolledBackAnnotation] != "" {
			rb = &Rollback{}
			if json.Unmarshal([]byte(cr.Annotations[RolledBackAnnotation]), rb) != nil || rb.Generation != rel.Generation {
				return nil, nil // a later spec: tried again
			}
		}
	}
	if rb == nil {
		return nil, nil
	}
	// The annotation is only as good as the status the controller wrote: a rollback returns to
	// the last revision Ready everywhere, never to one a record merely claims.
	if rb.To != rel.Status.LastCompleteRevision {
		return nil, fmt.Errorf("the rollback recorded on revision %s returns to revision %s, which is not the last revision Ready everywhere (%q): nothing is rolled back; change the Release's spec to roll out again",
			b.Revision, rb.To, rel.Status.LastCompleteRevision)
	}
	good := c.lastComplete(rel, b.Revision)
	if good == nil {
		return nil, fmt.Errorf("revision %s, which the failed revision %s rolled back to, is no longer in the history", rb.To, b.Revision)
	}
	goodRel := Undo(rel, revisionOf(good))
	in, _, stall := c.src.inputs(ctx, goodRel)
	if stall != nil {
		return nil, fmt.Errorf("rolling back to revision %d: %s", good.Revision, stall.stalledMessage)
	}
	gb, err := renderRecorded(goodRel, revisionOf(good), in)
	if err != nil {
		return nil, fmt.Errorf("rolling back: %w", err)
	}
	waves := slices.Clone(normal.waves)
	slices.Reverse(waves)
	g := normal.gates
	g.soak, g.manual, g.maxFailures = 0, false, math.MaxInt // a rollback does not stop
	return &target{bundle: gb, waves: waves, gates: g, stall: &progress{stalledReason: "RolledBack",
		stalledMessage: fmt.Sprintf("%s; every member it reached returns to revision %d (%s), the last Ready everywhere; revision %s is not tried again until the spec changes",
			rb.Message, rb.Number, rb.To, b.Revision)}}, nil
}

// startRollback records that revision b failed past maxFailures and rolls back to the last
// revision Ready everywhere; it says why not when there is none.
func (c *Controller) startRollback(ctx context.Context, rel *v1alpha1.Release, b *Bundle, p plan) error {
	var failed *appsv1.ControllerRevision
	for _, cr := range c.revisionsOf(rel) {
		if cr.Labels[v1alpha1.RevisionLabel] == b.Revision {
			failed = cr
		}
	}
	good := c.lastComplete(rel, b.Revision)
	if failed == nil || good == nil {
		return errors.New("the failed revision is not in the history yet")
	}
	// A pass that began before the cache held the last pass's record (rollingBack found none)
	// may find it here: the rollback is recorded, and said, once.
	if raw := failed.Annotations[RolledBackAnnotation]; raw != "" {
		var done Rollback
		if json.Unmarshal([]byte(raw), &done) == nil && done.Generation == rel.Generation {
			return nil
		}
	}
	rb := Rollback{To: good.Labels[v1alpha1.RevisionLabel], Number: good.Revision, Generation: rel.Generation,
		Message: stoppedMessage(&p, MaxFailures(rel.Spec.Rollout, len(p.judged))), Failed: memberNames(p.failed)}
	if err := c.annotateRevision(ctx, failed, RolledBackAnnotation, rb); err != nil {
		return fmt.Errorf("recording the rollback of revision %s: %w", b.Revision, err)
	}
	if rec := c.recorder.Load(); rec != nil {
		(*rec).Event(rel, corev1.EventTypeWarning, EventRolledBack, fmt.Sprintf("revision %s failed on %s: rolling back to revision %s (%s)",
			b.Revision, namesOf(p.failed, 5), strconv.FormatInt(good.Revision, 10), rb.To))
	}
	return nil
}

// lastComplete is the record of the last revision of rel, but revision, that was Ready
// everywhere, as the Release's status (which only the controller writes) names it: whoever may
// write ControllerRevisions in the cluster set cannot make a record of their own the revision a
// rollback returns to. The record is checked against its hash when it is rendered
// (renderRecorded).
func (c *Controller) lastComplete(rel *v1alpha1.Release, revision string) *appsv1.ControllerRevision {
	want := rel.Status.LastCompleteRevision
	if want == "" || want == revision {
		return nil
	}
	var good *appsv1.ControllerRevision
	for _, cr := range c.revisionsOf(rel) { // oldest first
		if cr.Labels[v1alpha1.RevisionLabel] == want {
			good = cr
		}
	}
	return good
}
