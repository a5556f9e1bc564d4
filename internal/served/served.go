package served

import (
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
