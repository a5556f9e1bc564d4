package delivery

import (
	"fmt"

	"k8s.io/client-go/discovery"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/internal/served"
)

// Served returns nil when the registry that d asks serves Releases, ReleaseStatusSlices and
// PlacementDecisions; otherwise an error that says which is missing and what to install. A
// Controller without them could only log a failed watch, again and again.
func Served(d discovery.DiscoveryInterface) error {
	for _, api := range []struct {
		gv, resource, install string
	}{
		{v1alpha1.SchemeGroupVersion.String(), "releases", "install the registry's CRDs with `clusterregistry install` (schema version 6 or later)"},
		{v1alpha1.SchemeGroupVersion.String(), "releasestatusslices", "install the registry's CRDs with `clusterregistry install` (schema version 6 or later)"},
		{cpv1alpha1.GroupVersion.String(), "placementdecisions", "kubectl apply -f " + decision.CRDManifest},
	} {
		ok, err := served.Resource(d, api.gv, api.resource)
		if err != nil {
			return fmt.Errorf("asking the registry whether it serves %s (%s): %w", api.resource, api.gv, err)
		}
		if !ok {
			return fmt.Errorf("%s (%s) are not served; %s", api.resource, api.gv, api.install)
		}
	}
	return nil
}
