package delivery_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// gpu is an extended resource only this test's Nodes have, so that what it fills and asks moves
// no other test's figures: the members' own KWOK Nodes have no such resource.
const gpu corev1.ResourceName = "example.com/gpu"

// gpuNode registers a KWOK Node with gpus on member, tainted so that only Pods asking for it
// land there; gone at the test's end.
func gpuNode(t *testing.T, member kubernetes.Interface, name string, gpus int64) {
	t.Helper()
	ctx := fleettest.Context(t, time.Minute)
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods: resource.MustParse("110"), gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}
	_, err := member.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "type": "kwok"}},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: string(gpu), Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: alloc, Allocatable: alloc},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = member.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// gpuPod asks the member's scheduler for gpus, tolerating the gpu Nodes' taint.
func gpuPod(t *testing.T, member kubernetes.Interface, ns, name string, gpus int64) {
	t.Helper()
	q := corev1.ResourceList{gpu: *resource.NewQuantity(gpus, resource.DecimalSI)}
	_, err := member.CoreV1().Pods(ns).Create(fleettest.Context(t, time.Minute), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		Tolerations:                  []corev1.Toleration{{Key: string(gpu), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		AutomountServiceAccountToken: ptr.To(false),
		Containers:                   []corev1.Container{{Name: "c", Image: "registry.example/train:1", Resources: corev1.ResourceRequirements{Requests: q, Limits: q}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// Real members with KWOK Nodes of different allocatable, the capacity controller and the
// placements controller: capacity reaches status; fit chooses only the member with room on one
// Node; prefer orders by free gpus; filling the chosen member (a Pod the member's own scheduler
// binds) moves nothing, except under rebalance, which moves to the member now with more.
func TestPlacementsFitRealMembers(t *testing.T) {
	ns := fleettest.CopySet(t, lf)
	ctx := fleettest.Context(t, 4*time.Minute)
	m1, m2 := kubernetes.NewForConfigOrDie(lf.Member("member-1").Config), kubernetes.NewForConfigOrDie(lf.Member("member-2").Config)
	gpuNode(t, m1, ns+"-gpu", 4)
	gpuNode(t, m2, ns+"-gpu", 1)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	ready := &deliveryEnv{ns: ns, registry: registry} // the health controller's part, by hand
	ready.setReady(t, "member-1", metav1.ConditionTrue, v1alpha1.ReasonReachable)
	ready.setReady(t, "member-2", metav1.ConditionTrue, v1alpha1.ReasonReachable)
	fleet := startCapacity(t, ctx, ns)
	decisions := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	sched, err := scheduler.NewController(fleet, registry, decisions, scheduler.ControllerOptions{Namespace: ns,
		Options: scheduler.Options{SchedulerName: "clusterregistry", Fresh: func() bool { return fleet.Status().Fresh() }}})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- sched.Run(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })

	// Capacity in status: within 30 s of start (caches synced, then one 200 ms observation).
	started := time.Now()
	for member, want := range map[string]string{"member-1": "4", "member-2": "1"} {
		waitResources(t, registry, ns, member, func(r *v1alpha1.ClusterResources) bool {
			q := r.Allocatable[gpu]
			return q.String() == want
		}, 30*time.Second, "allocatable gpus")
	}
	t.Logf("capacity in status %s after the controller started", time.Since(started).Round(time.Millisecond))

	prefer := []v1alpha1.PlacementPreference{{Weight: 1, CEL: `cluster.resources.free[?"example.com/gpu"].orValue(0.0)`}}
	for name, spec := range map[string]v1alpha1.PlacementSpec{
		"fits":      {Fit: &v1alpha1.PlacementFit{PerNode: corev1.ResourceList{gpu: resource.MustParse("2")}}},
		"roomiest":  {Count: ptr.To[int32](1), Prefer: prefer},
		"rebalance": {Count: ptr.To[int32](1), Prefer: prefer, Rebalance: &v1alpha1.PlacementRebalance{CooldownSeconds: ptr.To[int64](60)}},
	} {
		_, err := registry.ClusterregistryV1alpha1().Placements(ns).Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for _, name := range []string{"fits", "roomiest", "rebalance"} {
		waitChosen(t, registry, decisions, ns, name, []string{"member-1"})
	}

	// member-1 fills: its own scheduler binds a Pod of all 4 gpus to its gpu Node.
	apps := ns + "-train"
	_, err = m1.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apps}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m1.CoreV1().Namespaces().Delete(context.Background(), apps, metav1.DeleteOptions{}) })
	gpuPod(t, m1, apps, "train", 4)
	waitResources(t, registry, ns, "member-1", func(r *v1alpha1.ClusterResources) bool {
		q := r.Requested[gpu]
		return q.String() == "4"
	}, time.Minute, "requested gpus")
	waitChosen(t, registry, decisions, ns, "rebalance", []string{"member-2"})
	require.Never(t, func() bool {
		return !slices.Equal(chosenOf(t, decisions, ns, "fits"), []string{"member-1"}) || !slices.Equal(chosenOf(t, decisions, ns, "roomiest"), []string{"member-1"})
	}, 2*time.Second, 50*time.Millisecond, "a placement without rebalance moved when its member filled")
}

// startCapacity runs a capacity controller (observing every 200 ms, no heartbeat) on a Fleet
// of cluster set ns until the test ends, and returns the Fleet.
func startCapacity(t *testing.T, ctx context.Context, ns string) *multicluster.Fleet {
	t.Helper()
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config))})
	require.NoError(t, err)
	fleet := multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	t.Cleanup(fleet.Stop)
	capCtrl, err := capacity.New(capacity.Options{Registry: registry, Members: fleet, Interval: 200 * time.Millisecond, Heartbeat: time.Hour})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- capCtrl.Start(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	return fleet
}

// waitResources waits until member's status.resources satisfy ok.
func waitResources(t *testing.T, registry versioned.Interface, ns, member string, ok func(*v1alpha1.ClusterResources) bool, within time.Duration, what string) {
	t.Helper()
	var got *v1alpha1.ClusterResources
	require.Eventually(t, func() bool {
		c, err := registry.ClusterregistryV1alpha1().Clusters(ns).Get(t.Context(), member, metav1.GetOptions{})
		if err != nil || c.Status.Resources == nil {
			return false
		}
		got = c.Status.Resources
		return ok(got)
	}, within, 50*time.Millisecond, "%s: %s of status.resources %+v", member, what, got)
}

// chosenOf is the members the decision of placement name chooses, sorted.
func chosenOf(t *testing.T, decisions cpversioned.Interface, ns, name string) []string {
	d, err := decision.Read(t.Context(), decisions, ns, name)
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range d.Clusters {
		out = append(out, c.Name)
	}
	slices.Sort(out)
	return out
}

// waitChosen waits until placement name's decision chooses want, and says the Placement's
// status if it does not.
func waitChosen(t *testing.T, registry versioned.Interface, decisions cpversioned.Interface, ns, name string, want []string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !slices.Equal(chosenOf(t, decisions, ns, name), want); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			p, err := registry.ClusterregistryV1alpha1().Placements(ns).Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			t.Fatalf("placement %s chooses %v, not %v; its status: %+v", name, chosenOf(t, decisions, ns, name), want, p.Status)
		}
	}
}
