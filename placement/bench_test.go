package placement_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// BenchmarkDecide is one decision over 10,000 candidates of which a selector keeps 100, as
// each of BenchmarkScheduler's 1,000 placements decides: the plain policy beside one that adds
// fit and two preferences. Reported: µs per decision (decision-us).
func BenchmarkDecide(b *testing.B) {
	var candidates []*v1alpha1.Cluster
	for i := range 10000 {
		c := cluster(fmt.Sprintf("member-%05d", i), "group", fmt.Sprintf("g%03d", i%100), "region", fmt.Sprintf("r%d", i/100%5))
		alloc := int64(8 + i%4*8)
		c.Status.Resources = &v1alpha1.ClusterResources{Nodes: 3, ReadyNodes: 3,
			Allocatable:      corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(alloc, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("64Gi")},
			Requested:        corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(i%7)*alloc/8, resource.DecimalSI)},
			LargestFree:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			LastObservedTime: metav1.NewTime(now.Add(-time.Minute))}
		candidates = append(candidates, c)
	}
	plain := placement.Policy{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": "g042"}},
		Count: ptr.To[int32](5), Spread: &placement.Spread{Label: "region"}}
	scored := plain
	scored.Fit = &placement.Fit{Total: cpu("2")}
	scored.Prefer = []placement.Preference{
		{Weight: 10, CEL: `cluster.resources.free["cpu"] / cluster.resources.allocatable["cpu"]`},
		{Weight: 1, CEL: `cluster.labels.?region.orValue("") == "r0" ? 1 : 0`},
	}
	for _, bc := range []struct {
		name   string
		policy placement.Policy
	}{{"plain", plain}, {"fit-prefer", scored}} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := placement.Compile(bc.policy)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for range b.N {
				if d := c.Decide(placement.Input{Key: "fleet/web", Candidates: candidates, Now: now}); len(d.Chosen) != 5 {
					b.Fatalf("chose %d", len(d.Chosen))
				}
			}
			per := time.Since(start) / time.Duration(b.N)
			b.ReportMetric(float64(per.Microseconds()), "decision-us")
		})
	}
}
