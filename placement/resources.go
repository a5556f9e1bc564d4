package placement

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Fit is what a member must have free to be chosen, in total and on one Node.
type Fit = v1alpha1.PlacementFit

// Preference is one weighted score of a member, from a CEL expression.
type Preference = v1alpha1.PlacementPreference

// Rebalance lets a placement replace chosen members by better-scored ones, with a cooldown.
type Rebalance = v1alpha1.PlacementRebalance

// figures are a Cluster's status.resources as fit and prefer may judge them: nil, with why,
// when they are missing or older than the policy's bound.
func (c *Compiled) figures(cl *v1alpha1.Cluster, now time.Time) (*v1alpha1.ClusterResources, Reason, string) {
	res := cl.Status.Resources
	if res == nil {
		return nil, ReasonResourcesUnknown, "no status.resources (is a capacity controller running? clusterregistry controllers --controllers capacity)"
	}
	if age := now.Sub(res.LastObservedTime.Time); age > c.maxAge {
		return nil, ReasonResourcesStale, fmt.Sprintf("status.resources observed %s ago, more than maxResourceAgeSeconds (%s)",
			age.Round(time.Second), c.maxAge)
	}
	return res, "", ""
}

// short is what list lacks of want, resource by resource in name order ("cpu: 4 asked, 2500m
// free"); "" when it holds all of it.
func short(want, list corev1.ResourceList, what string) string {
	var missing []string
	for _, name := range sortedNames(want) {
		w, have := want[name], list[name]
		if have.Cmp(w) < 0 {
			missing = append(missing, fmt.Sprintf("%s: %s asked, %s %s", name, w.String(), have.String(), what))
		}
	}
	return strings.Join(missing, "; ")
}

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(list))
	for n := range list {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// fits is why res does not hold what the policy's fit asks, "" when it does. A member chosen
// before (kept) is judged on its allocatable, which what it runs for the placement does not use
// up; a new one on what is free.
func (c *Compiled) fits(res *v1alpha1.ClusterResources, kept bool) string {
	fit := c.policy.Fit
	if kept {
		return joinShortfalls(short(fit.Total, res.Allocatable, "allocatable"), short(fit.PerNode, res.Allocatable, "allocatable"))
	}
	return joinShortfalls(short(fit.Total, res.Free(), "free"), short(fit.PerNode, res.LargestFree, "free on the Node with most"))
}

// joinShortfalls joins two shortfalls, either of which may be empty.
func joinShortfalls(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

// resourceVars is status.resources as CEL sees them: quantities as doubles (cpu in cores,
// memory in bytes).
func resourceVars(res *v1alpha1.ClusterResources) map[string]any {
	doubles := func(list corev1.ResourceList) map[string]float64 {
		out := make(map[string]float64, len(list))
		for name, q := range list {
			out[string(name)] = q.AsApproximateFloat64()
		}
		return out
	}
	return map[string]any{
		"nodes": int64(res.Nodes), "readyNodes": int64(res.ReadyNodes),
		"capacity": doubles(res.Capacity), "allocatable": doubles(res.Allocatable),
		"requested": doubles(res.Requested), "largestFree": doubles(res.LargestFree),
		"free": doubles(res.Free()),
	}
}
