package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
)

// The controller refuses a registry without Releases, their slices or PlacementDecisions, saying
// what to install.
func TestServed(t *testing.T) {
	d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	require.ErrorContains(t, Served(d), "releases (clusterregistry.k8s.io/v1alpha1) are not served; install the registry's CRDs with `clusterregistry install` (schema version 6 or later)")
	d.Resources = []*metav1.APIResourceList{{GroupVersion: v1alpha1.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{{Name: "releases"}}}}
	require.ErrorContains(t, Served(d), "releasestatusslices (clusterregistry.k8s.io/v1alpha1) are not served")
	d.Resources[0].APIResources = append(d.Resources[0].APIResources, metav1.APIResource{Name: "releasestatusslices"})
	require.ErrorContains(t, Served(d), "placementdecisions (multicluster.x-k8s.io/v1alpha1) are not served; kubectl apply -f "+decision.CRDManifest)
	d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: cpv1alpha1.GroupVersion.String(), APIResources: []metav1.APIResource{{Name: "placementdecisions"}}})
	require.NoError(t, Served(d))
}
