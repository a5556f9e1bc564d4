package served

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// Resource reports whether the server d asks serves resource in group version gv. A group version
// the server does not know is false, not an error; err is why the server could not tell.
func Resource(d discovery.DiscoveryInterface, gv, resource string) (bool, error) {
	resources, err := d.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}

// API is a resource a controller needs a registry to serve, and what to do when it does not.
type API struct {
	GroupVersion, Resource, Install string
}

// Require returns nil when d serves every api, else an error naming the first missing one and
// its Install advice, or the discovery error that kept it from asking.
func Require(d discovery.DiscoveryInterface, apis ...API) error {
	for _, api := range apis {
		ok, err := Resource(d, api.GroupVersion, api.Resource)
		if err != nil {
			return fmt.Errorf("asking the registry whether it serves %s (%s): %w", api.Resource, api.GroupVersion, err)
		}
		if !ok {
			return fmt.Errorf("%s (%s) are not served; %s", api.Resource, api.GroupVersion, api.Install)
		}
	}
	return nil
}
