package clusterprofile

import (
	"errors"
	"fmt"

	"k8s.io/client-go/discovery"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/internal/served"
)

// CRDManifest is where SIG Multicluster's ClusterProfile CRD comes from, at the version of
// sigs.k8s.io/cluster-inventory-api this module is built with:
//
//	kubectl apply -f <CRDManifest>
const CRDManifest = "https://raw.githubusercontent.com/kubernetes-sigs/cluster-inventory-api/v0.1.2/config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml"

// ErrNotServed is the error, for errors.Is, of a registry that does not serve ClusterProfiles:
// the CRD is not installed. A Publisher or Source over such a registry would only log a failed
// watch every second or two, so both refuse at start.
var ErrNotServed = errors.New("ClusterProfiles (multicluster.x-k8s.io/v1alpha1) are not served: the ClusterProfile CRD is not installed")

// Served returns nil when the API server that d asks serves ClusterProfiles; otherwise an error
// that says so and what to install (errors.Is(err, ErrNotServed)), or why it could not tell.
func Served(d discovery.DiscoveryInterface) error {
	gv := cpv1alpha1.GroupVersion.String()
	ok, err := served.Resource(d, gv, "clusterprofiles")
	if err != nil {
		return fmt.Errorf("asking the API server whether it serves ClusterProfiles (%s): %w", gv, err)
	}
	if !ok {
		return notServed()
	}
	return nil
}

func notServed() error {
	return fmt.Errorf("%w; install it: kubectl apply -f %s", ErrNotServed, CRDManifest)
}
