package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
)

// Issue 74: revision 1, then revision 2 rolled out completely, in waves, with onFailure Rollback
// and a short progress deadline; then member-2's Node stopped heartbeating, as a real member's
// Nodes die, and the Deployment there was no longer Available. The releases controller judged
// member-2 Failed by the deadline of an apply long past and stopped the complete revision for
// good (a rollback would have followed, to revision 1). Now: member-2 is Degraded, the Release
// Available=False and Degraded, never Stalled, nothing is rolled back or applied again on any
// member, and once the Node is back the Release is Ready everywhere by itself. Real members:
// KWOK's Node, kube-controller-manager's node lifecycle and Deployment controllers.
func TestCompleteRevisionSurvivesALaterBlip(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-blip"
	env.appNamespace(t, appNS)
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "blip", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, deployment("web"))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Rollout: &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups, SoakSeconds: 1, ProgressDeadlineSeconds: ptr.To[int32](10),
			OnFailure: v1alpha1.FailureRollback},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	complete := func(r *v1alpha1.Release) bool {
		return r.Status.LastCompleteRevision == r.Status.Revision && r.Status.Ready == 2 &&
			meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseProgressing).Reason == "Complete"
	}
	first := env.waitRelease(t, "blip", "revision 1 complete", complete).Status.Revision
	env.updateRelease(t, env.ns, "blip", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = manifests(t, deployment("web", "registry.example/web:2"))
	})
	second := env.waitRelease(t, "blip", "revision 2 complete", func(r *v1alpha1.Release) bool { return r.Status.Revision != first && complete(r) }).Status.Revision
	uids := map[string]types.UID{}
	for name, m := range env.members {
		waitAvailable(t, m, appNS, "web", "registry.example/web:2")
		uids[name] = deploymentUID(t, m, appNS)
	}

	// member-2's Nodes stop heartbeating (its KWOK frozen): the node lifecycle controller marks
	// them NotReady and their Pods not Ready, and the Deployment is not Available.
	member2 := lf.Member("member-2")
	require.NoError(t, member2.PauseNodes())
	t.Cleanup(func() { _ = member2.ResumeNodes() })
	got := env.waitReleaseWithin(t, "blip", "member-2 Degraded", 3*time.Minute, func(r *v1alpha1.Release) bool {
		return phase(r, v1alpha1.PhaseDegraded) == 1
	})
	requireNotStopped(t, got, second)
	require.Equal(t, metav1.ConditionFalse, condition(got, v1alpha1.ReleaseAvailable))
	degraded := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseDegraded)
	require.Equal(t, metav1.ConditionTrue, degraded.Status)
	require.Equal(t, string(v1alpha1.PhaseDegraded), degraded.Reason)
	t.Logf("Degraded: %s; member-2: %+v", degraded.Message, got.Status.Worst)
	// The deadline (10 s) from its apply passed long ago, and a pass judges at once: the old
	// judgement came within the first pass. Every status written for a few passes more is
	// looked at.
	watchNotStopped(t, env, "blip", second, 6*time.Second)

	// The Nodes are back: Ready everywhere again, by itself, at revision 2.
	require.NoError(t, member2.ResumeNodes())
	back := env.waitRelease(t, "blip", "Ready everywhere again", complete)
	requireNotStopped(t, back, second)
	for name, m := range env.members {
		waitAvailable(t, m, appNS, "web", "registry.example/web:2")
		require.Equal(t, uids[name], deploymentUID(t, m, appNS), "%s: the Deployment was replaced", name)
	}
	events := env.releaseEvents(t, "blip")
	require.Empty(t, events[delivery.EventRolledBack], "a complete revision was rolled back")
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "blip", metav1.DeleteOptions{}))
}

func deploymentUID(t *testing.T, member kubernetes.Interface, ns string) types.UID {
	t.Helper()
	d, err := member.AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return d.UID
}

// requireNotStopped: the Release is at revision and its rollout did not stop.
func requireNotStopped(t *testing.T, r *v1alpha1.Release, revision string) {
	t.Helper()
	require.Equal(t, revision, r.Status.Revision, "the Release left its revision")
	stalled := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
	require.Equal(t, metav1.ConditionFalse, stalled.Status, "Stalled %s: %s", stalled.Reason, stalled.Message)
	progressing := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseProgressing)
	require.NotEqual(t, "RollingOut", progressing.Reason, "a complete revision rolls out again: %s", progressing.Message)
	require.Zero(t, phase(r, v1alpha1.PhaseFailed), "a member Failed: %+v", r.Status.Worst)
}

// watchNotStopped watches Release name for d and fails at the first status that stops its
// rollout or leaves revision.
func watchNotStopped(t *testing.T, env *deliveryEnv, name, revision string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	w, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	require.NoError(t, err)
	defer w.Stop()
	for ev := range w.ResultChan() {
		if r, ok := ev.Object.(*v1alpha1.Release); ok {
			requireNotStopped(t, r, revision)
		}
	}
}
