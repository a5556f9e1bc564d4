package delivery_test

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
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

// Six replicas of a trainer, each asking 1 of a gpu Node's gpus, divided by Capacity across real
// members whose gpu Nodes hold 4 and 2: 4 and 2, as the capacity controller's figures say, kept
// in the Release's status.divisions. Its own Pods then fill both members' gpus (the figures say
// nothing is free), member-2 gains a Node of 6 more, and a restarted releases controller reads
// the division back: no share moves (divided again, member-2 would have 4), and neither
// member's Deployment is changed again.
func TestCapacityDivisionOnRealMembers(t *testing.T) {
	// Controllers without startDelivery's check for leaks when each stops: the capacity
	// controller beside them runs on (TestReleaseLifecycle checks the releases controller's).
	env := launchDelivery(t, fleettest.CopySet(t, lf), nil, nil)
	ctx := fleettest.Context(t, 4*time.Minute)
	appNS := "app-" + env.ns // its own: a run before may still be removing its trainer
	env.appNamespace(t, appNS)
	m1, m2 := env.members["member-1"], env.members["member-2"]
	gpuNode(t, m1, env.ns+"-gpu", 4)
	gpuNode(t, m2, env.ns+"-gpu", 2)
	startCapacity(t, ctx, env.ns)
	for member, want := range map[string]string{"member-1": "4", "member-2": "2"} {
		waitResources(t, env.registry, env.ns, member, func(r *v1alpha1.ClusterResources) bool {
			q := r.Allocatable[gpu]
			return q.String() == want
		}, 30*time.Second, "allocatable gpus")
	}
	trainer := deployment("trainer")
	one := corev1.ResourceList{gpu: resource.MustParse("1")}
	trainer.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: one, Limits: one}
	trainer.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: string(gpu), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	env.decide(t, "member-1", "member-2")
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "trainer"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: manifests(t, trainer)}, Placement: v1alpha1.ReleasePlacement{Name: "web"}, TargetNamespace: appNS,
		Divide: []v1alpha1.ReleaseDivision{{Name: "trainer", Group: "apps", Kind: "Deployment", ObjectName: "trainer", Replicas: 6, By: v1alpha1.DivideByCapacity}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitReplicas(t, env, appNS, "member-1", "trainer", 4)
	waitReplicas(t, env, appNS, "member-2", "trainer", 2)
	rel := env.waitRelease(t, "trainer", "Ready at 4 and 2", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 && len(r.Status.Divisions) == 1 })
	require.Equal(t, []v1alpha1.ReleaseDivisionShare{{Cluster: "member-1", Replicas: 4}, {Cluster: "member-2", Replicas: 2}}, rel.Status.Divisions[0].Shares)

	// Its Pods fill every gpu: the figures say so, and no share moves.
	for _, member := range []string{"member-1", "member-2"} {
		waitResources(t, env.registry, env.ns, member, func(r *v1alpha1.ClusterResources) bool {
			f := r.Free()[gpu]
			return f.IsZero()
		}, time.Minute, "no gpu free")
	}
	// member-2 gains a Node of 6 gpus: divided again, it would take 4 of the 6; kept, it has 2.
	gpuNode(t, m2, env.ns+"-gpu-2", 6)
	waitResources(t, env.registry, env.ns, "member-2", func(r *v1alpha1.ClusterResources) bool {
		q := r.Allocatable[gpu]
		return q.String() == "8"
	}, 30*time.Second, "member-2's new gpus")
	generations := map[string]int64{}
	for member, kube := range map[string]kubernetes.Interface{"member-1": m1, "member-2": m2} {
		d, err := kube.AppsV1().Deployments(appNS).Get(ctx, "trainer", metav1.GetOptions{})
		require.NoError(t, err)
		generations[member] = d.Generation
	}
	restartWritingNoRelease(t, env, "trainer", 2)
	got := env.waitRelease(t, "trainer", "Ready after the restart", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	require.Equal(t, rel.Status.Divisions, got.Status.Divisions, "the division moved")
	for member, kube := range map[string]kubernetes.Interface{"member-1": m1, "member-2": m2} {
		d, err := kube.AppsV1().Deployments(appNS).Get(ctx, "trainer", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, generations[member], d.Generation, "%s's trainer was changed after its Pods filled it, or after the restart", member)
	}
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(ctx, "trainer", metav1.DeleteOptions{}))
}

// restartWritingNoRelease restarts env's releases controller (without startDelivery's leak
// check) and fails if either controller writes the Release name from then on: watched from
// before the stop, until the new one has applied to the members (applies writes on them) and 2 s
// more, when its status would have been written.
func restartWritingNoRelease(t *testing.T, env *deliveryEnv, name string, applies int64) {
	t.Helper()
	rels := env.registry.ClusterregistryV1alpha1().Releases(env.ns)
	before, err := rels.Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	env.stop()
	w, err := rels.Watch(t.Context(), metav1.ListOptions{ResourceVersion: before.ResourceVersion, FieldSelector: "metadata.name=" + name})
	require.NoError(t, err)
	defer w.Stop()
	*env = *launchDelivery(t, env.ns, nil, nil)
	require.Eventually(t, func() bool { return env.ctrl.Writes() >= applies }, 30*time.Second, 20*time.Millisecond,
		"the restarted controller did not reach the members")
	deadline := time.After(2 * time.Second)
	for {
		select {
		case ev := <-w.ResultChan():
			b, _ := json.MarshalIndent(ev.Object, "", " ")
			t.Fatalf("Release %s written after the restart: %s %s", name, ev.Type, b)
		case <-deadline:
			return
		}
	}
}
