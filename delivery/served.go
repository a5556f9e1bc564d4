package delivery

import (
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
	install := "install the registry's CRDs with `clusterregistry install` (schema version 6 or later)"
	return served.Require(d,
		served.API{GroupVersion: v1alpha1.SchemeGroupVersion.String(), Resource: "releases", Install: install},
		served.API{GroupVersion: v1alpha1.SchemeGroupVersion.String(), Resource: "releasestatusslices", Install: install},
		served.API{GroupVersion: cpv1alpha1.GroupVersion.String(), Resource: "placementdecisions", Install: "kubectl apply -f " + decision.CRDManifest})
}
