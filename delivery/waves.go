package delivery

import (
	"cmp"
	"math"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Waves splits a decision's members (in its order) into the waves a rollout goes through:
// one wave for All; the decision's rollout groups in order for Groups, from group 0 (members
// groups does not name last); chunks of maxConcurrency (25% when unset, rounded up, at least 1) for Concurrency.
func Waves(members []types.NamespacedName, groups map[types.NamespacedName]int, r *v1alpha1.ReleaseRollout) [][]types.NamespacedName {
	if len(members) == 0 {
		return nil
	}
	strategy := v1alpha1.RolloutAll
	if r != nil && r.Strategy != "" {
		strategy = r.Strategy
	}
	switch strategy {
	case v1alpha1.RolloutGroups:
		byGroup := map[int][]types.NamespacedName{}
		for _, m := range members {
			g, ok := groups[m]
			if !ok || g < 0 {
				g = math.MaxInt
			}
			byGroup[g] = append(byGroup[g], m)
		}
		keys := make([]int, 0, len(byGroup))
		for g := range byGroup {
			keys = append(keys, g)
		}
		slices.Sort(keys)
		out := make([][]types.NamespacedName, 0, len(keys))
		for _, g := range keys {
			out = append(out, byGroup[g])
		}
		return out
	case v1alpha1.RolloutConcurrency:
		size := scaled(r.MaxConcurrency, len(members), true, intstr.FromString("25%"))
		size = max(size, 1)
		var out [][]types.NamespacedName
		for start := 0; start < len(members); start += size {
			out = append(out, members[start:min(start+size, len(members))])
		}
		return out
	}
	return [][]types.NamespacedName{members}
}

// MaxFailures is how many members of total may fail before a rollout stops.
func MaxFailures(r *v1alpha1.ReleaseRollout, total int) int {
	if r == nil {
		return 0
	}
	return scaled(r.MaxFailures, total, false, intstr.FromInt32(0))
}

// scaled is an int-or-percentage of total, rounded up or down.
func scaled(v *intstr.IntOrString, total int, roundUp bool, def intstr.IntOrString) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(cmp.Or(v, &def), total, roundUp)
	if err != nil || n < 0 {
		n, _ = intstr.GetScaledValueFromIntOrPercent(&def, total, roundUp)
	}
	return n
}
