package delivery_test

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Six replicas of shop divided 2:1 across real members run 4 and 2 there, as the members' own
// Deployment controllers report them Available. member-2's outage (its API server stopped, and
// its Cluster not Ready) moves its share to member-1 (6, applied through a paused etcd there, to
// the same Deployment), and member-2's Deployment is kept as it was (the same uid, no new
// generation: nothing deleted, nothing applied there); back, the shares are 4 and 2 again, and
// member-2, whose share never changed, is not applied to again.
func TestDividedReplicasOnRealMembers(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-divided"
	env.appNamespace(t, appNS)
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, deployment("shop"))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Divide: []v1alpha1.ReleaseDivision{{Name: "shop", Group: "apps", Kind: "Deployment", ObjectName: "shop", Replicas: 6,
			Weights: []v1alpha1.ReleaseDivisionWeight{{Cluster: "member-1", Weight: 2}, {Cluster: "member-2", Weight: 1}}}},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	replicas := func(member string, want int32) { t.Helper(); waitReplicas(t, env, appNS, member, "shop", want) }
	replicas("member-1", 4)
	replicas("member-2", 2)
	env.waitRelease(t, "shop", "Ready on both", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	requireShares(t, env, map[string]int32{"member-1": 4, "member-2": 2})
	kept, err := env.members["member-2"].AppsV1().Deployments(appNS).Get(t.Context(), "shop", metav1.GetOptions{})
	require.NoError(t, err)
	requireKept := func(what string) {
		t.Helper()
		d, err := env.members["member-2"].AppsV1().Deployments(appNS).Get(t.Context(), "shop", metav1.GetOptions{})
		require.NoError(t, err, "%s: member-2 lost shop", what)
		require.Equal(t, kept.UID, d.UID, "%s: member-2's shop was deleted and made again", what)
		require.Equal(t, kept.Generation, d.Generation, "%s: member-2's shop was changed", what)
		require.Equal(t, int32(2), *d.Spec.Replicas, "%s: member-2's share", what)
	}

	first1, err := env.members["member-1"].AppsV1().Deployments(appNS).Get(t.Context(), "shop", metav1.GetOptions{})
	require.NoError(t, err)

	// member-2's API server stops, and it leaves the decision (past the placement's
	// tolerations); member-1's etcd is paused as its new share goes out, so the apply waits on
	// its storage and is retried. member-1 takes member-2's share.
	down := lf.Member("member-2")
	require.NoError(t, down.StopAPIServer())
	t.Cleanup(func() { _ = down.StartAPIServer() }) // started again below; a no-op then
	env.setReady(t, "member-2", metav1.ConditionFalse, v1alpha1.ReasonUnreachable)
	busy := lf.Member("member-1")
	require.NoError(t, busy.PauseEtcd())
	env.decide(t, "member-1")
	time.Sleep(3 * time.Second) // the apply of member-1's new share waits on its storage
	require.NoError(t, busy.ResumeEtcd())
	replicas("member-1", 6)
	env.waitRelease(t, "shop", "member-1 Ready at 6, member-2 departed", func(r *v1alpha1.Release) bool {
		m := memberPhase(r, "member-2")
		return r.Status.Ready == 1 && m != nil && m.Phase == v1alpha1.PhaseDeparted
	})
	requireShares(t, env, map[string]int32{"member-1": 6, "member-2": 2})
	d1, err := env.members["member-1"].AppsV1().Deployments(appNS).Get(t.Context(), "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, first1.UID, d1.UID, "member-1's shop was made again for its new share")
	require.NoError(t, down.StartAPIServer())
	requireKept("after its API server's restart")

	// Back: the shares return.
	env.setReady(t, "member-2", metav1.ConditionTrue, v1alpha1.ReasonReachable)
	env.decide(t, "member-1", "member-2")
	replicas("member-1", 4)
	env.waitRelease(t, "shop", "Ready on both again", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 && len(r.Status.Worst) == 0 })
	requireKept("back")
	requireShares(t, env, map[string]int32{"member-1": 4, "member-2": 2})
	var sum int32
	for _, m := range []string{"member-1", "member-2"} {
		d, err := env.members[m].AppsV1().Deployments(appNS).Get(t.Context(), "shop", metav1.GetOptions{})
		require.NoError(t, err)
		sum += *d.Spec.Replicas
	}
	require.Equal(t, int32(6), sum, "the members' shares do not sum to the total")
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "shop", metav1.DeleteOptions{}))
}

// waitReplicas waits until member's Deployment name has want replicas, Available as its
// Deployment controller says.
func waitReplicas(t *testing.T, env *deliveryEnv, ns, member, name string, want int32) {
	t.Helper()
	kube := env.members[member]
	require.Eventually(t, func() bool {
		d, err := kube.AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == want
	}, time.Minute, 50*time.Millisecond, "%s's %s never had %d replicas", member, name, want)
	waitAvailable(t, kube, ns, name, "registry.example/web:1")
}

// requireShares: each member's entry in the status slices says its share of division shop.
func requireShares(t *testing.T, env *deliveryEnv, want map[string]int32) {
	t.Helper()
	var got map[string]int32
	require.Eventually(t, func() bool {
		got = map[string]int32{}
		for name, m := range env.statusSlices(t, "shop") {
			for _, s := range m.Shares {
				if s.Name == "shop" {
					got[name] = s.Replicas
				}
			}
		}
		return maps.Equal(want, got)
	}, 30*time.Second, 100*time.Millisecond, "the members' shares in status are not %v", want)
}
