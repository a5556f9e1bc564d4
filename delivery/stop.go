package delivery

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
			Message: stoppedMessage(&p, MaxFailures(rel.Spec.Rollout, len(p.judged)))}
		for _, k := range p.failed {
			stop.Failed = append(stop.Failed, k.Name)
		}
		raw, _ := json.Marshal(stop)
		upd := cr.DeepCopy()
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		upd.Annotations[StoppedAnnotation] = string(raw)
		c.writes.Add(1)
		if _, err := c.kube.AppsV1().ControllerRevisions(rel.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("recording that the rollout of revision %s stopped: %w", revision, err)
		}
		return nil
	}
	return nil
}
