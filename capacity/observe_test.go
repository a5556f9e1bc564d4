package capacity_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/capacity"
)

func node(name, cpu, memory string, ready bool, extra corev1.ResourceList) *corev1.Node {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("110")}
	for k, q := range extra {
		alloc[k] = q
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{
		Capacity: alloc, Allocatable: alloc,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}},
	}}
}

func pod(name, on, cpu, memory string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: on, Containers: []corev1.Container{{
		Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}},
	}}}, Status: corev1.PodStatus{Phase: phase}}
}

// Requests count on the Nodes that can take Pods, as the scheduler counts them; done, unbound
// and elsewhere Pods do not; largestFree is each resource's most free on any one Node.
func TestObserve(t *testing.T) {
	gpu := corev1.ResourceName("nvidia.com/gpu")
	cordoned := node("cordoned", "8", "32Gi", true, nil)
	cordoned.Spec.Unschedulable = true
	nodes := []*corev1.Node{
		node("a", "4", "16Gi", true, corev1.ResourceList{gpu: resource.MustParse("2")}),
		node("b", "8", "8Gi", true, nil),
		node("down", "16", "64Gi", false, nil),
		cordoned,
	}
	withInit := pod("init", "b", "100m", "1Gi", corev1.PodRunning)
	withInit.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}}}
	pods := []*corev1.Pod{
		pod("web", "a", "1", "4Gi", corev1.PodRunning),
		withInit, // counts 5 cpu, its init container's, larger than its container's 100m
		pod("done", "a", "3", "8Gi", corev1.PodSucceeded),
		pod("pending", "", "16", "1Gi", corev1.PodPending),
		pod("cordoned", "cordoned", "1", "1Gi", corev1.PodRunning),
	}
	at := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	r := capacity.Observe(nodes, pods, at)
	require.Equal(t, int32(4), r.Nodes)
	require.Equal(t, int32(2), r.ReadyNodes)
	require.Equal(t, "12", qty(r.Allocatable, corev1.ResourceCPU))
	require.Equal(t, "24Gi", qty(r.Allocatable, corev1.ResourceMemory))
	require.Equal(t, "2", qty(r.Allocatable, gpu))
	require.Equal(t, "6", qty(r.Requested, corev1.ResourceCPU))
	require.Equal(t, "5Gi", qty(r.Requested, corev1.ResourceMemory))
	require.Equal(t, "2", qty(r.Requested, corev1.ResourcePods))
	// a has 3 cpu free, b 3 as well (8 less 5); a the most memory free, 12Gi over b's 7Gi.
	require.Equal(t, "3", qty(r.LargestFree, corev1.ResourceCPU))
	require.Equal(t, "12Gi", qty(r.LargestFree, corev1.ResourceMemory))
	require.Equal(t, "2", qty(r.LargestFree, gpu), "a's gpus")
	require.Equal(t, "109", qty(r.LargestFree, corev1.ResourcePods))
	require.True(t, r.LastObservedTime.Time.Equal(at))

	// A Node full past its allocatable is free of nothing, not of less than nothing.
	full := capacity.Observe(nodes[:1], []*corev1.Pod{pod("big", "a", "6", "1Gi", corev1.PodRunning)}, at)
	require.Equal(t, "0", qty(full.LargestFree, corev1.ResourceCPU))
	require.Empty(t, capacity.Observe(nil, nil, at).LargestFree, "no Node, nothing free")

	// Each resource's most on any one Node: the gpus of a Node with little cpu are not hidden
	// behind the Node with the most cpu.
	mixed := capacity.Observe([]*corev1.Node{node("cpu", "16", "8Gi", true, nil), node("gpu", "2", "32Gi", true, corev1.ResourceList{gpu: resource.MustParse("4")})}, nil, at)
	require.Equal(t, "16", qty(mixed.LargestFree, corev1.ResourceCPU))
	require.Equal(t, "32Gi", qty(mixed.LargestFree, corev1.ResourceMemory))
	require.Equal(t, "4", qty(mixed.LargestFree, gpu))
}

// qty is l's quantity of k, as a string.
func qty(l corev1.ResourceList, k corev1.ResourceName) string {
	q := l[k]
	return q.String()
}

// A member whose Nodes name more resources than status.resources holds (32) has its lists cut to
// that, the standard resources kept, so that the registry takes the write.
func TestObserveCapsTheResourcesItNames(t *testing.T) {
	extra := corev1.ResourceList{}
	for i := range 40 {
		extra[corev1.ResourceName(fmt.Sprintf("example.com/device-%02d", i))] = resource.MustParse("1")
	}
	r := capacity.Observe([]*corev1.Node{node("a", "4", "16Gi", true, extra)}, nil, time.Now())
	for _, l := range []corev1.ResourceList{r.Capacity, r.Allocatable, r.LargestFree} {
		require.Len(t, l, 32)
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
			require.Contains(t, l, name)
		}
	}
	require.Contains(t, r.Allocatable, corev1.ResourceName("example.com/device-00"), "the others by name")
	require.NotContains(t, r.Allocatable, corev1.ResourceName("example.com/device-39"))
}
