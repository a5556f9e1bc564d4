package clusterregistry_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// The server refuses the Placements that placement.Compile refuses for a reason the schema can
// state, naming the same field; what only Compile can check (a selector's syntax, CEL) is the
// scheduler's to report as Misconfigured.
func TestPlacementValidation(t *testing.T) {
	ctx := testContext(t)
	placements := registryClient(t).ClusterregistryV1alpha1().Placements(newNamespace(t))
	for _, tc := range []struct {
		name  string
		spec  v1alpha1.PlacementSpec
		field string
	}{
		{"spread without count", v1alpha1.PlacementSpec{Spread: &v1alpha1.PlacementSpread{Label: "region"}}, "spec.spread"},
		{"spread without label", v1alpha1.PlacementSpec{Count: ptr.To[int32](2), Spread: &v1alpha1.PlacementSpread{}}, "spec.spread.label"},
		{"negative count", v1alpha1.PlacementSpec{Count: ptr.To[int32](-1)}, "spec.count"},
		{"IdentityChanged tolerated", v1alpha1.PlacementSpec{Tolerations: []v1alpha1.PlacementToleration{{Reason: v1alpha1.ReasonIdentityChanged}}}, "spec.tolerations[0].reason"},
		{"negative toleration", v1alpha1.PlacementSpec{Tolerations: []v1alpha1.PlacementToleration{{Seconds: ptr.To[int64](-5)}}}, "spec.tolerations[0].seconds"},
		{"empty rollout groups", v1alpha1.PlacementSpec{RolloutGroupSize: ptr.To[int32](0)}, "spec.rolloutGroupSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{GenerateName: "p-"}, Spec: tc.spec}, metav1.CreateOptions{})
			require.True(t, apierrors.IsInvalid(err), "%v", err)
			require.ErrorContains(t, err, tc.field)
			_, err = placement.Compile(tc.spec)
			require.Error(t, err, "Compile takes what the server refuses")
		})
	}
	// A policy the server takes and Compile refuses: reported by the scheduler, not lost.
	p, err := placements.Create(ctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "bad-cel"},
		Spec: v1alpha1.PlacementSpec{CEL: "cluster.labels["}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = placement.Compile(p.Spec)
	require.ErrorContains(t, err, "cel:")
}
