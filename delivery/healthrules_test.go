package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A health check of a core kind names it without a hole where its empty group is
// ("spec.health[0].current ( ConfigMap)" before).
func TestHealthRuleErrorsNameTheKind(t *testing.T) {
	rel := &v1alpha1.Release{Spec: v1alpha1.ReleaseSpec{Health: []v1alpha1.ReleaseHealthCheck{{Kind: "ConfigMap", Current: "self.data.ready =="}}}}
	_, _, err := compileRules(rel)
	require.ErrorContains(t, err, "spec.health[0].current (ConfigMap): ")
}
