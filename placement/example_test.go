package placement_test

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// Two production members out of four, spread across regions (which of the two in eu is the
// placement's own stable choice: another placement may choose the other); an Unreachable member stays chosen
// for five minutes; every candidate explained.
func Example() {
	policy, err := placement.Compile(placement.Policy{
		Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		Count:       ptr.To[int32](2),
		Spread:      &placement.Spread{Label: "region"},
		Tolerations: []placement.Toleration{{Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](300)}},
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	member := func(name, env, region string) *v1alpha1.Cluster {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name,
			Labels: map[string]string{"env": env, "region": region}}}
		c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonReachable, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))})
		return c
	}
	candidates := []*v1alpha1.Cluster{
		member("prod-eu-1", "prod", "eu"), member("prod-eu-2", "prod", "eu"),
		member("prod-us-1", "prod", "us"), member("dev-eu-1", "dev", "eu"),
	}
	d := policy.Decide(placement.Input{Key: "fleet/web", Candidates: candidates, Now: now})
	for _, e := range d.Explanations {
		fmt.Printf("%-10s %-9s %s\n", e.Cluster.Name, e.Reason, e.Message)
	}
	// Output:
	// dev-eu-1   Selector  labels do not match the selector env=prod
	// prod-eu-1  OverCount count is 2, and 2 members came first
	// prod-eu-2  Chosen    fits the policy
	// prod-us-1  Chosen    fits the policy
}

// A CEL expression over a Cluster, as a Placement's cel takes it, for a choice of Clusters
// outside a Placement (a Release's overrides).
func ExampleCompileClusterExpression() {
	expr, err := placement.CompileClusterExpression(`cluster.labels["tier"] == "gold" && cluster.version.startsWith("v1.3")`)
	if err != nil {
		panic(err)
	}
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "eu-1", Labels: map[string]string{"tier": "gold"}},
		Status: v1alpha1.ClusterStatus{Version: "v1.35.2"}}
	ok, err := expr.Matches(c)
	fmt.Println(ok, err)
	// Output: true <nil>
}

// Two members with room for 4 cpu, the roomiest first; a member without figures is out, and
// says why.
func ExampleCompiled_Decide_fitAndPrefer() {
	policy, err := placement.Compile(placement.Policy{
		Count:  ptr.To[int32](2),
		Fit:    &placement.Fit{Total: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
		Prefer: []placement.Preference{{Weight: 10, CEL: `cluster.resources.free["cpu"] / cluster.resources.allocatable["cpu"]`}},
	})
	if err != nil {
		panic(err)
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	member := func(name, allocatable, requested string) *v1alpha1.Cluster {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}
		c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
			Reason: v1alpha1.ReasonReachable, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))})
		if allocatable != "" {
			c.Status.Resources = &v1alpha1.ClusterResources{Nodes: 2, ReadyNodes: 2,
				Allocatable:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(allocatable)},
				Requested:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(requested)},
				LastObservedTime: metav1.NewTime(now.Add(-time.Minute))}
		}
		return c
	}
	d := policy.Decide(placement.Input{Key: "fleet/web", Now: now, Candidates: []*v1alpha1.Cluster{
		member("big", "32", "8"), member("half", "16", "8"), member("full", "16", "14"), member("new", "", ""),
	}})
	for _, e := range d.Explanations {
		fmt.Printf("%-4s %-16s %s\n", e.Cluster.Name, e.Reason, e.Message)
	}
	// Output:
	// big  Chosen           fits the policy; score 7.5
	// full DoesNotFit       cpu: 4 asked, 2 free
	// half Chosen           fits the policy; score 5
	// new  ResourcesUnknown no status.resources (is a capacity controller running? clusterregistry controllers --controllers capacity), so whether it fits is not known
}
