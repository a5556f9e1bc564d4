package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterResources is what a cluster's Nodes hold and what its Pods ask of them, as a capacity
// controller last observed them through the cluster's API server. Placements decide from it
// (what is free, in total and on one Node); a reader judges how fresh it is by
// lastObservedTime.
type ClusterResources struct {
	// nodes is how many Nodes the cluster has.
	Nodes int32 `json:"nodes"`

	// readyNodes is how many of them are Ready and schedulable (not cordoned): those that
	// capacity, allocatable, requested and largestFree count.
	ReadyNodes int32 `json:"readyNodes"`

	// capacity is the sum of the ready Nodes' capacity (cpu, memory, pods, and extended
	// resources such as nvidia.com/gpu).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Capacity corev1.ResourceList `json:"capacity,omitempty"`

	// allocatable is the sum of what the ready Nodes offer to Pods (capacity less what the
	// Nodes reserve).
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`

	// requested is what the Pods bound to the ready Nodes that have not terminated request, as
	// the scheduler counts it (the larger of the init containers' and the containers' sum,
	// with the Pod's overhead); pods is their number.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Requested corev1.ResourceList `json:"requested,omitempty"`

	// largestFree is, for each resource, the most of it free (allocatable less requested) on
	// any one ready Node: a Pod that asks more of a resource than this fits on no Node, which a
	// sum would hide. The most of each may be on different Nodes, so a Pod asking less of each
	// may still fit on none.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	LargestFree corev1.ResourceList `json:"largestFree,omitempty"`

	// lastObservedTime is when the controller last observed the figures. It writes them when
	// one moves past its threshold, and otherwise once per heartbeat, so that while it runs this
	// is at most a heartbeat old.
	LastObservedTime metav1.Time `json:"lastObservedTime"`
}
