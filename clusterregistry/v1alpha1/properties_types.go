package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ClusterStatusProperty is one property a cluster says of itself: a ClusterProperty object of
// SIG Multicluster's About API (about.k8s.io/v1alpha1) on the cluster, by its name and value.
type ClusterStatusProperty struct {
	// name is the ClusterProperty's name, such as cluster.clusterset.k8s.io or
	// clusterset.k8s.io.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// value is the property's value, as the ClusterProperty's spec.value says it.
	// +kubebuilder:validation:MaxLength=128
	Value string `json:"value"`

	// lastObservedTime is when the controller last read the property from the cluster.
	LastObservedTime metav1.Time `json:"lastObservedTime"`
}

// Well-known properties of the About API (KEP-2149).
const (
	// PropertyClusterID is the property whose value is a cluster's ID within its cluster set:
	// where a member has it, it is the member's ID (status.clusterID), in place of its
	// kube-system namespace's UID.
	PropertyClusterID = "cluster.clusterset.k8s.io"
	// PropertyClusterSet is the property whose value names the cluster set a cluster says it is
	// in.
	PropertyClusterSet = "clusterset.k8s.io"
)
