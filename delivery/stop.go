package delivery

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A stop stays stopped. A rollout that fails past maxFailures stops at its revision, and the
// stop is recorded on the revision's ControllerRevision (StoppedAnnotation), as a rollback is:
// worked out from the decision's members alone, it would be forgotten as soon as a failed member
// left the decision (excluded, or gone for its health), and the next wave would begin with the
// bad revision. A recorded stop holds, whatever members leave, join or come back, until the
// Release's spec changes (rollout resume changes it too) or someone says rollout restart. While
// it holds, no member that did not run the revision is given it.

// StoppedAnnotation, on a revision's ControllerRevision, records that its rollout stopped (JSON,
// a Stop).
const StoppedAnnotation = "clusterregistry.k8s.io/stopped"

// Stop is a revision's stopped rollout, as StoppedAnnotation records it.
type Stop struct {
	// Generation is the Release's when it stopped, and RestartedAt its RestartedAtAnnotation
	// then: a later spec, or a restart, rolls out again.
	Generation  int64  `json:"generation"`
	RestartedAt string `json:"restartedAt,omitempty"`
	// Failed are the members that failed, and Message what the rollout said.
	Failed  []string `json:"failed"`
	Message string   `json:"message"`
}

// holds reports whether the stop still stands for rel as it is now.
func (s *Stop) holds(rel *v1alpha1.Release) bool {
	return s != nil && s.Generation == rel.Generation && s.RestartedAt == rel.Annotations[v1alpha1.RestartedAtAnnotation]
}

// recordedStop is the stop recorded on revision's ControllerRevision, if it still holds.
func (c *Controller) recordedStop(rel *v1alpha1.Release, revision string) *Stop {
	for _, cr := range c.revisionsOf(rel) {
		raw := cr.Annotations[StoppedAnnotation]
		if cr.Labels[v1alpha1.RevisionLabel] != revision || raw == "" {
			continue
		}
		s := &Stop{}
		if json.Unmarshal([]byte(raw), s) == nil && s.holds(rel) {
			return s
		}
	}
	return nil
}

// recordStop records, once, that revision's rollout stopped as p says; the Release's owner
// calls it. A revision not yet in the history is recorded at a later pass.
func (c *Controller) recordStop(ctx context.Context, rel *v1alpha1.Release, revision string, p plan) error {
	if p.recorded != nil {
		return nil
	}
	for _, cr := range c.revisionsOf(rel) {
		if cr.Labels[v1alpha1.RevisionLabel] != revision {
			continue
		}
		stop := Stop{Generation: rel.Generation, RestartedAt: rel.Annotations[v1alpha1.RestartedAtAnnotation],
			Message: stoppedMessage(&p, MaxFailures(rel.Spec.Rollout, len(p.judged))), Failed: memberNames(p.failed)}
		if err := c.annotateRevision(ctx, cr, StoppedAnnotation, stop); err != nil {
			return fmt.Errorf("recording that the rollout of revision %s stopped: %w", revision, err)
		}
		return nil
	}
	return nil
}

// annotateRevision records record, as JSON, in annotation key of revision cr.
func (c *Controller) annotateRevision(ctx context.Context, cr *appsv1.ControllerRevision, key string, record any) error {
	raw, err := json.Marshal(record)
	if err != nil {
		return err
	}
	upd := cr.DeepCopy()
	if upd.Annotations == nil {
		upd.Annotations = map[string]string{}
	}
	upd.Annotations[key] = string(raw)
	c.writes.Add(1)
	_, err = c.kube.AppsV1().ControllerRevisions(cr.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	return err
}

// memberNames are the members' Cluster names.
func memberNames(keys []types.NamespacedName) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.Name)
	}
	return out
}
