package capacity_test

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// lf is a registry and one member: a real API server, whose Nodes and Pods the tests make
// themselves (no kubelet moves them).
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// BenchmarkCapacity's simulated members run in a child process of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 1}, nil)
}

// startFleet follows the registry's Clusters of set ns until the test ends.
func startFleet(t *testing.T, ns string) *multicluster.Fleet {
	t.Helper()
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets:  access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
		ClientIP: netip.MustParseAddr("127.0.0.1"),
	})
	require.NoError(t, err)
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(fleettest.Context(t, time.Minute)))
	t.Cleanup(fleet.Stop)
	return fleet
}

// makeNode registers a Ready Node of cpu and memory on kube, gone at the test's end.
func makeNode(t *testing.T, kube kubernetes.Interface, name, cpu, memory string) {
	t.Helper()
	ctx := fleettest.Context(t, time.Minute)
	n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}
	n.Status = corev1.NodeStatus{Capacity: alloc, Allocatable: alloc, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}
	_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// bindPod makes a Pod requesting cpu on Node on, in ns.
func bindPod(t *testing.T, kube kubernetes.Interface, ns, name, on, cpu string) {
	t.Helper()
	_, err := kube.CoreV1().Pods(ns).Create(fleettest.Context(t, time.Minute), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		NodeName: on, AutomountServiceAccountToken: new(false),
		Containers: []corev1.Container{{Name: "c", Image: "example.com/c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// A member's Nodes and Pods reach its Cluster's status.resources; at steady state, and while
// Pods that add up to less than the threshold come, nothing is written; a Pod past it, or a
// Node cordoned, is written at the next observation.
func TestCapacityInStatus(t *testing.T) {
	fleetmain.Integration(t)
	ns := fleettest.CopySet(t, lf)
	member := lf.Members[0]
	kube := kubernetes.NewForConfigOrDie(member.Config)
	ctx := fleettest.Context(t, 3*time.Minute)
	makeNode(t, kube, "cap-a", "4", "16Gi")
	makeNode(t, kube, "cap-b", "8", "8Gi")
	apps := "capacity-apps"
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apps}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), apps, metav1.DeleteOptions{}) })
	_, err = kube.CoreV1().ServiceAccounts(apps).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	bindPod(t, kube, apps, "web", "cap-a", "1")

	c, err := capacity.New(capacity.Options{Registry: versioned.NewForConfigOrDie(lf.Registry.Config), Members: startFleet(t, ns),
		Interval: 100 * time.Millisecond, Heartbeat: time.Hour})
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(runCtx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	status := func(want func(r *v1alpha1.ClusterResources) bool, what string) *v1alpha1.ClusterResources {
		t.Helper()
		var got *v1alpha1.ClusterResources
		require.Eventually(t, func() bool {
			cl, err := clusters.Get(ctx, member.Name, metav1.GetOptions{})
			got = nil
			if err == nil {
				got = cl.Status.Resources
			}
			return got != nil && want(got)
		}, 30*time.Second, 50*time.Millisecond, "%s: status.resources is %+v", what, got)
		return got
	}
	first := status(func(r *v1alpha1.ClusterResources) bool { return r.ReadyNodes == 2 && r.Requested.Cpu().String() == "1" }, "the first observation")
	require.Equal(t, "12", first.Allocatable.Cpu().String())
	require.Equal(t, "1", first.Requested.Pods().String())
	require.Equal(t, "8", first.LargestFree.Cpu().String(), "largestFree is cap-b's, with the most cpu free")

	// Steady, then a Pod of a tenth of a cpu (under 5 % of 12): nothing is written.
	writes := c.Writes()
	bindPod(t, kube, apps, "small", "cap-b", "100m")
	require.Never(t, func() bool { return c.Writes() != writes }, 2*time.Second, 50*time.Millisecond, "a steady member, or a small Pod, was written")

	bindPod(t, kube, apps, "big", "cap-b", "4")
	status(func(r *v1alpha1.ClusterResources) bool { return r.Requested.Cpu().String() == "5100m" }, "a Pod past the threshold")

	n, err := kube.CoreV1().Nodes().Get(ctx, "cap-a", metav1.GetOptions{})
	require.NoError(t, err)
	n.Spec.Unschedulable = true
	_, err = kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	cordoned := status(func(r *v1alpha1.ClusterResources) bool { return r.ReadyNodes == 1 }, "a Node cordoned")
	require.Equal(t, int32(2), cordoned.Nodes)
	require.Equal(t, "4100m", cordoned.Requested.Cpu().String(), "the cordoned Node's Pod still counted")

	// Registered again, the Cluster (another UID, no status) has its figures written at once,
	// not at the next heartbeat (here an hour) as if its predecessor's still stood.
	old, err := clusters.Get(ctx, member.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, clusters.Delete(ctx, member.Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := clusters.Get(ctx, member.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 50*time.Millisecond)
	again := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: member.Name, Labels: old.Labels}, Spec: old.Spec}
	_, err = clusters.Create(ctx, again, metav1.CreateOptions{})
	require.NoError(t, err)
	status(func(r *v1alpha1.ClusterResources) bool { return r.ReadyNodes == 1 }, "the Cluster registered again")
}
