package readme

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// Every Placement shown in README.md and docs/ reads as one, field for field, and its policy
// compiles: an example a reader copies is one the scheduler takes.
func TestPlacementExamplesCompile(t *testing.T) {
	seen := 0
	for _, block := range fences(t, "yaml") {
		if !strings.Contains(block, "kind: Placement\n") {
			continue
		}
		seen++
		var p v1alpha1.Placement
		require.NoError(t, yaml.UnmarshalStrict([]byte(block), &p), "%s", block)
		_, err := placement.Compile(p.Spec)
		require.NoError(t, err, "%s", block)
	}
	require.NotZero(t, seen, "README.md shows no Placement")
}
