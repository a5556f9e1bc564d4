package capacity_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-registry/sdk/capacity"
)

// Pods coming and going move nothing until they add up past the threshold; a Node joining or
// leaving, or a resource appearing, always does.
func TestMoved(t *testing.T) {
	at := time.Now()
	nodes := []*corev1.Node{node("a", "10", "40Gi", true, nil), node("b", "10", "40Gi", true, nil)}
	written := capacity.Observe(nodes, []*corev1.Pod{pod("p", "a", "1", "1Gi", corev1.PodRunning)}, at)
	require.True(t, capacity.Moved(nil, &written, 0.05), "nothing written yet")
	require.False(t, capacity.Moved(&written, &written, 0.05))

	small := capacity.Observe(nodes, []*corev1.Pod{pod("p", "a", "1", "1Gi", corev1.PodRunning), pod("q", "b", "500m", "512Mi", corev1.PodRunning)}, at)
	require.False(t, capacity.Moved(&written, &small, 0.05), "half a cpu of 20 moved the figures")
	big := capacity.Observe(nodes, []*corev1.Pod{pod("p", "a", "1", "1Gi", corev1.PodRunning), pod("q", "b", "2", "512Mi", corev1.PodRunning)}, at)
	require.True(t, capacity.Moved(&written, &big, 0.05), "two cpus of 20 did not move the figures")

	third := capacity.Observe(append(nodes, node("c", "1", "1Gi", true, nil)), nil, at)
	require.True(t, capacity.Moved(&written, &third, 0.5), "a Node joined")
	cordoned := *nodes[1].DeepCopy()
	cordoned.Spec.Unschedulable = true
	fewer := capacity.Observe([]*corev1.Node{nodes[0], &cordoned}, nil, at)
	require.True(t, capacity.Moved(&written, &fewer, 0.5), "a Node was cordoned")
}

// Property: a stream of single Pods starting and stopping, each under the threshold alone, is
// written only when the figures drift past it from what was last written; the figures written
// never lag the truth by more than the threshold.
func TestMovedBoundsTheLag(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := []*corev1.Node{node("a", "100", "400Gi", true, nil)}
	var pods []*corev1.Pod
	written := capacity.Observe(nodes, pods, time.Now())
	writes := 0
	for i := range 2000 {
		if len(pods) > 0 && rng.IntN(2) == 0 {
			pods = pods[1:]
		} else {
			pods = append(pods, pod("p", "a", "500m", "1Gi", corev1.PodRunning))
		}
		now := capacity.Observe(nodes, pods, time.Now())
		if capacity.Moved(&written, &now, 0.05) {
			written, writes = now, writes+1
			continue
		}
		lag := now.Requested.Cpu().AsApproximateFloat64() - written.Requested.Cpu().AsApproximateFloat64()
		require.LessOrEqual(t, lag, 5.0, "step %d: the written figures lag by %.1f cpu, past 5 %% of 100", i, lag)
		require.GreaterOrEqual(t, lag, -5.0, "step %d", i)
	}
	require.Less(t, writes, 200, "a write for most of 2,000 half-cpu steps")
}
