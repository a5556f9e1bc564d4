package delivery_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// replica is one replica of a sharded releases controller: its Fleet, its membership of the
// group, its view of the members it owns and its Controller.
type replica struct {
	ctrl  *delivery.Controller
	peers *shard.Peers
	stop  func()
}

func startReplica(t *testing.T, ns, identity string) *replica {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kube)})
	require.NoError(t, err)
	fleet := multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	peers, err := shard.NewPeers(kube.CoordinationV1(), shard.PeerOptions{Namespace: ns, Group: "releases", Identity: identity,
		LeaseDuration: 3 * time.Second, RenewPeriod: 500 * time.Millisecond})
	require.NoError(t, err)
	view := shard.NewView(fleet, peers)
	ctrl, err := delivery.NewController(view, registry, kube, cpversioned.NewForConfigOrDie(lf.Registry.Config), delivery.ControllerOptions{
		Namespace: ns, MemberTimeout: 10 * time.Second, RetryAfter: 2 * time.Second,
		Fresh:    func() bool { return fleet.Status().Fresh() },
		Sharding: delivery.NewSharding(peers, fleet),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, fleet.Start(ctx))
	done := make(chan struct{}, 3)
	for _, run := range []func(context.Context) error{peers.Run, view.Run, ctrl.Run} {
		go func() {
			require.NoError(t, run(ctx))
			done <- struct{}{}
		}()
	}
	r := &replica{ctrl: ctrl, peers: peers}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		for range 3 {
			<-done
		}
		fleet.Stop()
	}
	t.Cleanup(r.stop)
	return r
}

// splitIdentities finds two replica identities that divide the two members between them (a on
// member-1, b on member-2) and that give the Release to owner, a or b.
func splitIdentities(ns, release string, ownerIsB bool) (a, b string) {
	key := func(name string) string { return ns + "/" + name }
	for i := 0; ; i++ {
		a, b = fmt.Sprintf("replica-a-%d", i), fmt.Sprintf("replica-b-%d", i)
		live := []shard.Peer{{ID: a}, {ID: b}}
		want := a
		if ownerIsB {
			want = b
		}
		if shard.Owner(key("member-1"), live) == a && shard.Owner(key("member-2"), live) == b && shard.Owner(key(release), live) == want {
			return a, b
		}
	}
}

// Two replicas divide the members of a Release between them: each applies to the members it
// owns; the second wave (the other replica's member) waits for the first to be Ready as its
// replica reports it; the Release's owner writes its status from both replicas' slices; nothing
// is written at steady state. When the first replica stops, the second takes its member with
// what was applied there (a new revision prunes on it what only the first applied), deletes
// the stopped replica's slices, and a deleted Release is removed from both members.
func TestReleaseShardedBetweenReplicas(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	defer func() { goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, ignore)...) }()
	ns := fleettest.CopySet(t, lf)
	env := &deliveryEnv{ns: ns, registry: versioned.NewForConfigOrDie(lf.Registry.Config),
		decisions: cpversioned.NewForConfigOrDie(lf.Registry.Config), members: map[string]kubernetes.Interface{}}
	for _, m := range lf.Members {
		env.members[m.Name] = kubernetes.NewForConfigOrDie(m.Config)
	}
	appNS := "app-sharded"
	for _, kube := range env.members {
		_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	// member-1 is replica a's, member-2 replica b's, and the Release b's: b writes its status
	// from a's report of member-1.
	idA, idB := splitIdentities(ns, "web", true)
	a := startReplica(t, ns, idA)
	b := startReplica(t, ns, idB)
	require.Eventually(t, func() bool { return len(a.peers.Live()) == 2 && len(b.peers.Live()) == 2 },
		10*time.Second, 50*time.Millisecond, "the replicas do not see each other")

	env.decide(t, "member-1", "member-2") // rollout groups 0 and 1
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, deployment("web", badImage), configMap("web-config", map[string]string{"color": "blue"}))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Rollout:         &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups},
	}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)

	// Wave 1 (member-1, replica a) is applied and progressing (a bad image: its Pods never run);
	// wave 2 waits for it.
	bad := env.waitRelease(t, "web", "wave 1 progressing, reported by replica a", func(r *v1alpha1.Release) bool {
		return r.Status.Members == 2 && r.Status.Wave == 1 && phase(r, v1alpha1.PhaseProgressing) == 1 && phase(r, v1alpha1.PhasePending) == 1
	}).Status.Revision
	time.Sleep(time.Second)
	_, err = env.members["member-2"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "replica b applied wave 2 before wave 1 was Ready: %v", err)

	// A good image: member-1's Deployment controller rolls it out, then replica b applies wave 2.
	env.updateRelease(t, ns, "web", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = manifests(t, deployment("web"), configMap("web-config", map[string]string{"color": "blue"}))
	})
	got := env.waitRelease(t, "web", "wave 2 applied by replica b after wave 1 was Ready", func(r *v1alpha1.Release) bool {
		return r.Status.Members == 2 && r.Status.Revision != bad && r.Status.Ready >= 1 && r.Status.Wave == 2
	})
	revision := got.Status.Revision
	env.waitRelease(t, "web", "available", func(r *v1alpha1.Release) bool {
		return condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue && r.Status.Ready == 2
	})
	sliceList := func() []v1alpha1.ReleaseStatusSlice { return releaseSlices(t, env, "web") }
	requireEachMemberInOneSlice(t, sliceList(), revision)
	f := &shardedRelease{env: env, ns: ns, appNS: appNS, a: a, b: b, revision: revision, sliceList: sliceList}
	t.Run("both replicas divide replicas alike", f.bothReplicasDivideReplicasAlike)
	t.Run("steady state writes nothing", f.steadyStateWritesNothing)
	t.Run("a replica that stops hands its member over with what was applied there", f.aReplicaThatStopsHandsItsMemberOverWithWhatWasAppliedThere)
	t.Run("deleting the Release removes its objects from every member", f.deletingTheReleaseRemovesItsObjectsFromEveryMember)

	b.stop()
}

// shardedRelease is what the subtests of TestReleaseShardedBetweenReplicas share.
type shardedRelease struct {
	env       *deliveryEnv
	ns        string
	appNS     string
	a         *replica
	b         *replica
	revision  string
	sliceList func() []v1alpha1.ReleaseStatusSlice
}

// bothReplicasDivideReplicasAlike is the subtest "both replicas divide replicas alike" of
// TestReleaseShardedBetweenReplicas: 5 replicas of web divided 3:2, each replica applying its
// own member's share and judging the other's at the share it divides for it; the rollout
// completes, each member running its share, reported once.
func (f *shardedRelease) bothReplicasDivideReplicasAlike(t *testing.T) {
	env := f.env
	env.updateRelease(t, f.ns, "web", func(cur *v1alpha1.Release) {
		cur.Spec.Divide = []v1alpha1.ReleaseDivision{{Name: "web", Group: "apps", Kind: "Deployment", ObjectName: "web", Replicas: 5,
			Weights: []v1alpha1.ReleaseDivisionWeight{{Cluster: "member-1", Weight: 3}, {Cluster: "member-2", Weight: 2}}}}
	})
	for member, want := range map[string]int32{"member-1": 3, "member-2": 2} {
		waitReplicas(t, env, f.appNS, member, "web", want)
	}
	env.waitRelease(t, "web", "complete at the shares", func(r *v1alpha1.Release) bool {
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == 2 && r.Status.Wave == 2 &&
			condition(r, v1alpha1.ReleaseAvailable) == metav1.ConditionTrue
	})
	shares := map[string]int32{}
	for _, sl := range f.sliceList() {
		for _, m := range sl.Members {
			require.True(t, strings.HasPrefix(m.Revision, f.revision+"-"), "%s runs %s, not its share of %s", m.Cluster, m.Revision, f.revision)
			for _, sh := range m.Shares {
				shares[m.Cluster] = sh.Replicas
			}
		}
	}
	require.Equal(t, map[string]int32{"member-1": 3, "member-2": 2}, shares, "the shares the replicas report")

	// Undivided again: every member back at the Release's revision, as the later subtests expect.
	env.updateRelease(t, f.ns, "web", func(cur *v1alpha1.Release) { cur.Spec.Divide = nil })
	env.waitRelease(t, "web", "complete undivided", func(r *v1alpha1.Release) bool {
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == 2 && r.Status.Wave == 2
	})
	require.Eventually(t, func() bool {
		for _, sl := range f.sliceList() {
			for _, m := range sl.Members {
				if m.Revision != f.revision {
					return false
				}
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "the members are not back at revision %s", f.revision)
}

// steadyStateWritesNothing is the subtest "steady state writes nothing" of TestReleaseShardedBetweenReplicas.
func (f *shardedRelease) steadyStateWritesNothing(t *testing.T) {
	a, b := f.a, f.b
	before := a.ctrl.Writes() + b.ctrl.Writes()
	time.Sleep(3 * time.Second)
	require.Equal(t, before, a.ctrl.Writes()+b.ctrl.Writes(), "writes at steady state")
}

// aReplicaThatStopsHandsItsMemberOverWithWhatWasAppliedThere is the subtest "a replica that stops hands its member over with what was applied there" of TestReleaseShardedBetweenReplicas.
func (f *shardedRelease) aReplicaThatStopsHandsItsMemberOverWithWhatWasAppliedThere(t *testing.T) {
	env, ns, appNS, a, b, revision, sliceList := f.env, f.ns, f.appNS, f.a, f.b, f.revision, f.sliceList
	// Suspended while a stops, so that b cannot learn member-1's objects by applying the
	// revision a applied: it must take them from a's slice.
	env.updateRelease(t, ns, "web", func(cur *v1alpha1.Release) { cur.Spec.Suspend = true })
	env.waitRelease(t, "web", "suspended", func(r *v1alpha1.Release) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return c != nil && c.Reason == "Suspended" && c.ObservedGeneration == r.Generation
	})
	a.stop()
	require.Eventually(t, func() bool { return len(b.peers.Live()) == 1 }, 10*time.Second, 50*time.Millisecond, "b still sees a")
	// A revision without the Deployment: b prunes it on member-1, where only a applied it.
	env.updateRelease(t, ns, "web", func(cur *v1alpha1.Release) {
		cur.Spec.Suspend = false
		cur.Spec.Source.Manifests = manifests(t, configMap("web-config", map[string]string{"color": "green"}))
	})
	env.waitRelease(t, "web", "new revision ready on both", func(r *v1alpha1.Release) bool {
		return r.Status.Revision != revision && r.Status.Ready == 2
	})
	for name, kube := range env.members {
		_, err := kube.AppsV1().Deployments(appNS).Get(t.Context(), "web", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s: the Deployment the revision dropped is still there: %v", name, err)
	}
	// b reports both members, and a's slices are gone.
	require.Eventually(t, func() bool {
		items := sliceList()
		return len(items) == 1 && len(items[0].Members) == 2
	}, 20*time.Second, 100*time.Millisecond, "replica b did not take over replica a's slices")
}

// deletingTheReleaseRemovesItsObjectsFromEveryMember is the subtest "deleting the Release removes its objects from every member" of TestReleaseShardedBetweenReplicas.
func (f *shardedRelease) deletingTheReleaseRemovesItsObjectsFromEveryMember(t *testing.T) {
	env, ns, appNS := f.env, f.ns, f.appNS
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(ns).Delete(t.Context(), "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.registry.ClusterregistryV1alpha1().Releases(ns).Get(t.Context(), "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 20*time.Second, 100*time.Millisecond, "the Release was not finalized")
	for name, kube := range env.members {
		_, err := kube.CoreV1().ConfigMaps(appNS).Get(t.Context(), "web-config", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s kept the Release's objects: %v", name, err)
	}
}

// releaseSlices are the status slices of Release name in env's set.
func releaseSlices(t *testing.T, env *deliveryEnv, name string) []v1alpha1.ReleaseStatusSlice {
	l, err := env.registry.ClusterregistryV1alpha1().ReleaseStatusSlices(env.ns).List(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=" + name})
	require.NoError(t, err)
	return l.Items
}

// requireEachMemberInOneSlice: each member is in one of slices, at revision, and each replica
// writes its own.
func requireEachMemberInOneSlice(t *testing.T, items []v1alpha1.ReleaseStatusSlice, revision string) {
	t.Helper()
	var reported []string
	replicas := map[string]bool{}
	for _, s := range items {
		replicas[s.Labels[v1alpha1.ReplicaLabel]] = true
		for _, m := range s.Members {
			reported = append(reported, m.Cluster)
			require.Equal(t, revision, m.Revision)
		}
	}
	slices.Sort(reported)
	require.Equal(t, []string{"member-1", "member-2"}, reported, "each member in one slice")
	require.Len(t, replicas, 2, "each replica writes its own slices")
}
