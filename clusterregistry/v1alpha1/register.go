package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of the cluster registry.
const GroupName = "clusterregistry.k8s.io"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource turns an unqualified resource name, such as "clusters", into a group-qualified one.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind turns an unqualified kind, such as "Cluster", into a group-qualified one.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

var (
	// SchemeBuilder collects the functions that add this package's types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this package's types to a scheme, for clients and controllers that decode them.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &Cluster{}, &ClusterList{}, &Placement{}, &PlacementList{}, &Release{}, &ReleaseList{}, &ReleaseStatusSlice{}, &ReleaseStatusSliceList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
