package delivery

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func names(n int) []types.NamespacedName {
	var out []types.NamespacedName
	for i := range n {
		out = append(out, types.NamespacedName{Namespace: "set", Name: fmt.Sprintf("m%02d", i)})
	}
	return out
}

func TestWaves(t *testing.T) {
	ms := names(10)
	require.Len(t, Waves(ms, nil, nil), 1, "All by default")
	require.Nil(t, Waves(nil, nil, nil))

	conc := &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutConcurrency}
	w := Waves(ms, nil, conc) // 25% of 10, rounded up: 3
	require.Len(t, w, 4)
	require.Equal(t, ms[:3], w[0])
	require.Equal(t, ms[9:], w[3])
	conc.MaxConcurrency = ptr.To(intstr.FromInt32(5))
	require.Len(t, Waves(ms, nil, conc), 2)
	conc.MaxConcurrency = ptr.To(intstr.FromString("bogus"))
	require.Len(t, Waves(ms, nil, conc), 4, "a bad value is the default, not a wave of everything")

	groups := map[types.NamespacedName]int{ms[0]: 2, ms[1]: 1, ms[2]: 2}
	w = Waves(ms[:4], groups, &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups})
	require.Equal(t, [][]types.NamespacedName{{ms[1]}, {ms[0], ms[2]}, {ms[3]}}, w, "groups in order, members without one last")

	// The placement numbers groups from 0 (as explain-placement shows them): group 0 goes first,
	// never with the members that have no group.
	groups = map[types.NamespacedName]int{ms[0]: 0, ms[2]: 1, ms[1]: 2}
	w = Waves(ms[:4], groups, &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups})
	require.Equal(t, [][]types.NamespacedName{{ms[0]}, {ms[2]}, {ms[1]}, {ms[3]}}, w, "group 0 is the first wave")
}

func TestMaxFailures(t *testing.T) {
	require.Equal(t, 0, MaxFailures(nil, 10))
	require.Equal(t, 2, MaxFailures(&v1alpha1.ReleaseRollout{MaxFailures: ptr.To(intstr.FromString("25%"))}, 10), "rounded down")
	require.Equal(t, 3, MaxFailures(&v1alpha1.ReleaseRollout{MaxFailures: ptr.To(intstr.FromInt32(3))}, 10))
}
