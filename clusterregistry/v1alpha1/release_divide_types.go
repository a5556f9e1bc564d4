package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReleaseDivision divides one workload's replicas across a Release's members, where without it
// every member runs the replica count the workload was written with.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.by) || self.by != 'Capacity' || !has(self.weights)`,message="weights are for by: Weights; by Capacity weighs each member by the workload's Pods that fit in its free allocatable"
//
// The shares are divided by largest remainder, so they sum to replicas exactly: each member has
// minPerMember, and what is left goes by weight, the largest fractions first (ties to the
// heavier member, then by name). A member receives its share as an override of the workload's
// spec.replicas, part of its revision: a changed share is applied to that member only, through
// the rollout's waves. Shares are divided again only when the decision's members change (or the
// division, or a weight's labels): Pods coming and going move nothing. A member that left the
// decision for its health keeps its objects at its old share until the others run theirs,
// Ready, and the departure grace has passed; back in the decision, it has its share again.
type ReleaseDivision struct {
	// name names the division in the members' status and in errors.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// group is the workload's API group: apps for a Deployment or StatefulSet.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the workload's kind; it must have spec.replicas.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// objectName is the workload's name among the Release's objects.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ObjectName string `json:"objectName"`
	// replicas is the total, divided across the members.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Replicas int32 `json:"replicas"`
	// minPerMember is the least share of each member, where the total allows it: a total below
	// minPerMember times the members gives each the total divided evenly, the rest by weight.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinPerMember int32 `json:"minPerMember,omitempty"`
	// by is how the members are weighed: Weights (the default), by weights; or Capacity, by how
	// many of the workload's Pods (its spec.template's requests, as the scheduler counts them)
	// fit in what each member has free: status.resources' allocatable less requested, which a
	// capacity controller writes, with what the member's own share asks added back. A member
	// whose figures are missing, or older than 900 s, weighs 0. A Capacity division is divided
	// when the members (or the division) change, and kept in the Release's status.divisions
	// until they change again: Pods coming and going, a restarted controller and another
	// replica of it move no share. It divides across at most 1000 members.
	// +optional
	By ReleaseDivisionBy `json:"by,omitempty"`
	// weights weigh the members of a division by Weights: a member's weight is that of the first
	// entry that names it or whose selector matches its Cluster's labels, and 1 when none does.
	// Every member weighs 1 when empty. Weights of 0 give a member minPerMember alone.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Weights []ReleaseDivisionWeight `json:"weights,omitempty"`
}

// ReleaseDivisionWeight is the weight of the members it names or selects.
//
// +kubebuilder:validation:XValidation:rule=`has(self.cluster) != has(self.clusterSelector)`,message="set exactly one of cluster and clusterSelector"
type ReleaseDivisionWeight struct {
	// cluster names one member's Cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`
	// clusterSelector selects members by their Cluster's labels.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// weight is the members' weight.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	Weight int32 `json:"weight"`
}

// ReleaseMemberShare is a member's share of one division: the replicas it was applied with.
type ReleaseMemberShare struct {
	// name is the division's name.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// replicas is the member's share.
	Replicas int32 `json:"replicas"`
}

// ReleaseDivisionBy is how a division weighs the members.
// +kubebuilder:validation:Enum=Weights;Capacity
type ReleaseDivisionBy string

// How divisions weigh the members.
const (
	// DivideByWeights weighs them by spec.divide[].weights.
	DivideByWeights ReleaseDivisionBy = "Weights"
	// DivideByCapacity weighs them by how many of the workload's Pods fit in what each has free.
	DivideByCapacity ReleaseDivisionBy = "Capacity"
)

// MaxCapacityDivisionMembers is how many members a Capacity division divides across at most:
// its shares are kept in the Release's status.
const MaxCapacityDivisionMembers = 1000

// ReleaseDivisionStatus is a Capacity division as the releases controller divided it.
type ReleaseDivisionStatus struct {
	// name is the division's name.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// basis is a hash of the division and of the members it was divided among: the shares are
	// kept while it is the basis of the division now.
	// +kubebuilder:validation:MaxLength=64
	Basis string `json:"basis"`
	// shares are each member's share, sorted by cluster.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Shares []ReleaseDivisionShare `json:"shares,omitempty"`
}

// ReleaseDivisionShare is one member's share of a division.
type ReleaseDivisionShare struct {
	// cluster is the member's Cluster.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// replicas is its share.
	Replicas int32 `json:"replicas"`
}
