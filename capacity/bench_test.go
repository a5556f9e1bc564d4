package capacity_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-registry/sdk/capacity"
)

// BenchmarkObserve is one observation of a member of 3 Nodes and 30 Pods, as the Controller
// makes one per member every Interval, and the Moved that follows it. Reported: the CPU of an
// observation per member (µs/member) and, at 1,000 members every 10 s, the share of one core
// that the observations take (core-%-at-1000-members).
func BenchmarkObserve(b *testing.B) {
	nodes := []*corev1.Node{node("a", "8", "32Gi", true, nil), node("b", "8", "32Gi", true, nil), node("c", "16", "64Gi", true, nil)}
	var pods []*corev1.Pod
	for i := range 30 {
		pods = append(pods, pod(fmt.Sprintf("p-%d", i), nodes[i%3].Name, "250m", "512Mi", corev1.PodRunning))
	}
	written := capacity.Observe(nodes, pods, time.Now())
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		now := capacity.Observe(nodes, pods, time.Now())
		if capacity.Moved(&written, &now, 0.05) {
			b.Fatal("an unchanged member moved")
		}
	}
	perMember := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(perMember.Nanoseconds())/1e3, "µs/member")
	b.ReportMetric(float64(perMember.Nanoseconds())*1000/float64((10*time.Second).Nanoseconds())*100, "core-%-at-1000-members")
}
