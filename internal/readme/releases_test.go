package readme

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
)

// Every Release shown in README.md and docs/ reads as one, field for field, and what it delivers
// inline renders: an example a reader copies is one the releases controller takes.
func TestReleaseExamplesRender(t *testing.T) {
	seen := 0
	for _, block := range fences(t, "yaml") {
		if !strings.Contains(block, "kind: Release\n") {
			continue
		}
		seen++
		var r v1alpha1.Release
		require.NoError(t, yaml.UnmarshalStrict([]byte(block), &r), "%s", block)
		if len(r.Spec.Source.Manifests) > 0 {
			b, err := delivery.Render(&r, delivery.Inputs{})
			require.NoError(t, err, "%s", block)
			require.NotEmpty(t, b.Objects)
		}
	}
	require.NotZero(t, seen, "README.md shows no Release")
}
