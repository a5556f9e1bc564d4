package fake_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	acv1alpha1 "github.com/cluster-registry/sdk/applyconfiguration/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// NewClientset used to fail on every Cluster ("no type found matching
// com.github.cluster-registry.sdk.clusterregistry.v1alpha1.Cluster", kubernetes/kubernetes#126850)
// because the apply configurations embedded an empty schema. A tool's unit tests depend on it: it
// is the fake that the generated code points them to, and the only one that serves apply.
func TestNewClientsetTracksClusterFields(t *testing.T) {
	ctx := context.Background()
	seeded := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "seeded"}}
	cs := fake.NewClientset(seeded)
	clusters := cs.ClusterregistryV1alpha1().Clusters("fleet")

	_, err := clusters.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "created"}}, metav1.CreateOptions{})
	require.NoError(t, err, "Create")

	applied := acv1alpha1.Cluster("east", "fleet").WithSpec(acv1alpha1.ClusterSpec().
		WithDisplayName("East").
		WithKubernetesAPIEndpoints(acv1alpha1.KubernetesAPIEndpoints().WithServerEndpoints(
			acv1alpha1.ServerAddressByClientCIDR().WithClientCIDR("0.0.0.0/0").WithServerAddress("https://east.example:6443"))))
	got, err := clusters.Apply(ctx, applied, metav1.ApplyOptions{FieldManager: "tool"})
	require.NoError(t, err, "Apply")
	require.Equal(t, "East", got.Spec.DisplayName)
	require.Len(t, got.ManagedFields, 1)
	require.Equal(t, "tool", got.ManagedFields[0].Manager)

	// Field ownership is tracked: another manager that sets the same field conflicts unless it
	// forces, as against a real API server.
	other := acv1alpha1.Cluster("east", "fleet").WithSpec(acv1alpha1.ClusterSpec().WithDisplayName("Other"))
	_, err = clusters.Apply(ctx, other, metav1.ApplyOptions{FieldManager: "other"})
	require.True(t, apierrors.IsConflict(err), "a second manager's apply of displayName: want a conflict, got %v", err)

	// serverEndpoints is a map keyed by clientCIDR, as in the CRD: a second manager adds an
	// entry beside the first instead of replacing the list.
	second := acv1alpha1.Cluster("east", "fleet").WithSpec(acv1alpha1.ClusterSpec().
		WithKubernetesAPIEndpoints(acv1alpha1.KubernetesAPIEndpoints().WithServerEndpoints(
			acv1alpha1.ServerAddressByClientCIDR().WithClientCIDR("10.0.0.0/8").WithServerAddress("https://10.0.0.1:6443"))))
	got, err = clusters.Apply(ctx, second, metav1.ApplyOptions{FieldManager: "other"})
	require.NoError(t, err, "Apply of a second server endpoint")
	require.Len(t, got.Spec.KubernetesAPIEndpoints.ServerEndpoints, 2, "both managers' endpoints")

	extracted, err := acv1alpha1.ExtractCluster(got, "tool")
	require.NoError(t, err, "ExtractCluster")
	require.Equal(t, "East", *extracted.Spec.DisplayName)
	require.Len(t, extracted.Spec.KubernetesAPIEndpoints.ServerEndpoints, 1, "tool owns only its own endpoint")

	status := acv1alpha1.Cluster("east", "fleet").WithStatus(acv1alpha1.ClusterStatus().
		WithVersion("v1.36.3").
		WithConditions(metav1ac.Condition().WithType(v1alpha1.ConditionReady).WithStatus(metav1.ConditionTrue).
			WithReason("Probed").WithMessage("ok").WithLastTransitionTime(metav1.Now())))
	got, err = clusters.ApplyStatus(ctx, status, metav1.ApplyOptions{FieldManager: "health"})
	require.NoError(t, err, "ApplyStatus")
	require.Equal(t, "v1.36.3", got.Status.Version)
	require.Equal(t, "East", got.Spec.DisplayName, "status apply leaves spec alone")
	list, err := clusters.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 3, "seeded, created and applied")
}
