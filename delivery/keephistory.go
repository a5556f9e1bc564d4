package delivery

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// keepHistory records a Release's revision b in its history (see History) and the times of its
// waves as plan p says, and lets the oldest revisions go past HistoryLimit. It writes only what
// changed: nothing at steady state.
func (c *Controller) keepHistory(ctx context.Context, rel *v1alpha1.Release, b *Bundle, p plan) error {
	objs, err := c.revisions.ByNamespace(rel.Namespace).List(labels.SelectorFromSet(labels.Set{v1alpha1.ReleaseLabel: rel.Name}))
	if err != nil {
		return err
	}
	var mine []*appsv1.ControllerRevision
	var current *appsv1.ControllerRevision
	var newest int64
	for _, o := range objs {
		cr := o.(*appsv1.ControllerRevision)
		if !metav1.IsControlledBy(cr, rel) {
			continue
		}
		mine = append(mine, cr)
		newest = max(newest, cr.Revision)
		if cr.Labels[v1alpha1.RevisionLabel] == b.Revision {
			current = cr
		}
	}
	client := c.kube.AppsV1().ControllerRevisions(rel.Namespace)
	now := time.Now()
	switch {
	case current == nil:
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: revisionName(rel, b.Revision), Namespace: rel.Namespace,
			Labels:          map[string]string{v1alpha1.ReleaseLabel: rel.Name, v1alpha1.RevisionLabel: b.Revision},
			Annotations:     map[string]string{WavesAnnotation: encodeWaves(waveTimes(nil, p, now))},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))}},
			Data: encodeRecord(recordOf(rel, b)), Revision: newest + 1}
		if cause := rel.Annotations[ChangeCauseAnnotation]; cause != "" {
			cr.Annotations[ChangeCauseAnnotation] = cause
		}
		c.writes.Add(1)
		if _, err := client.Create(ctx, cr, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		mine = append(mine, cr)
	default:
		upd := current.DeepCopy()
		have := revisionOf(current).Waves
		if current.Revision < newest {
			// Rolled out again (an undo): the newest number, and this rollout's waves.
			upd.Revision, have = newest+1, nil
		}
		if upd.Annotations == nil {
			upd.Annotations = map[string]string{}
		}
		// While it is the current revision, its cause follows the Release's, as a Deployment's
		// new ReplicaSet's does: kubectl annotate just after kubectl apply is recorded too.
		if cause := rel.Annotations[ChangeCauseAnnotation]; cause != "" {
			upd.Annotations[ChangeCauseAnnotation] = cause
		}
		upd.Annotations[WavesAnnotation] = encodeWaves(waveTimes(have, p, now))
		if complete(p) {
			upd.Annotations[CompleteAnnotation] = "true"
		}
		if !apiequality.Semantic.DeepEqual(upd, current) {
			c.writes.Add(1)
			if _, err := client.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	return c.trimHistory(ctx, mine, b.Revision)
}

// trimHistory deletes the oldest revisions past HistoryLimit, never the current one.
func (c *Controller) trimHistory(ctx context.Context, mine []*appsv1.ControllerRevision, current string) error {
	slices.SortFunc(mine, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	for _, cr := range mine[:max(len(mine)-HistoryLimit, 0)] {
		if cr.Labels[v1alpha1.RevisionLabel] == current {
			continue
		}
		c.writes.Add(1)
		err := c.kube.AppsV1().ControllerRevisions(cr.Namespace).Delete(ctx, cr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cr.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

func encodeWaves(w []WaveTimes) string {
	raw, _ := json.Marshal(w)
	return string(raw)
}

// complete: every member of the plan is Ready at its revision, every wave done.
func complete(p plan) bool {
	if !p.done || p.stopped || len(p.judged) == 0 {
		return false
	}
	for _, j := range p.judged {
		if j.phase != v1alpha1.PhaseReady {
			return false
		}
	}
	return true
}
