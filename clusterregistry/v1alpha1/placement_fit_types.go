package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
)

// PlacementFit is what a member must have free to be chosen: allocatable less requested, as its
// status.resources says (a capacity controller writes them).
type PlacementFit struct {
	// total is what the member's ready Nodes must have free in all, such as {cpu: 8, memory:
	// 16Gi}.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Total corev1.ResourceList `json:"total,omitempty"`

	// perNode is what must be free on one Node: status.resources.largestFree (each resource's
	// most free on any one Node) must hold it, so that a Pod of this size is not known to fit
	// nowhere on the member, which a sum would not show.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	PerNode corev1.ResourceList `json:"perNode,omitempty"`
}

// PlacementPreference is one weighted score of a member, from a CEL expression.
type PlacementPreference struct {
	// weight multiplies the expression's value in a member's score; 1 when zero.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight,omitempty"`

	// cel is a number (int or double) for a member, over the same `cluster` as the Placement's
	// cel, for example `cluster.resources.free["cpu"] / cluster.resources.allocatable["cpu"]`,
	// the share of its CPU left free. A member for which it cannot be evaluated (a figure it
	// reads is missing, or too old) is not scored, and is chosen after those that are.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	CEL string `json:"cel"`
}

// PlacementRebalance lets a placement replace chosen members by better-scored ones, which
// without it it never does while they still fit.
type PlacementRebalance struct {
	// cooldownSeconds is the least time between two rebalances that move members; 600 when
	// unset.
	// +optional
	// +kubebuilder:validation:Minimum=60
	CooldownSeconds *int64 `json:"cooldownSeconds,omitempty"`
}

// Defaults of fit, prefer and rebalance.
const (
	// DefaultMaxResourceAgeSeconds is how old a member's status.resources may be for fit and
	// prefer to judge it, when a Placement does not say: three of the capacity controller's
	// default heartbeats.
	DefaultMaxResourceAgeSeconds int64 = 900
	// DefaultRebalanceCooldownSeconds is the least time between two rebalances that move
	// members, when a Placement's rebalance does not say.
	DefaultRebalanceCooldownSeconds int64 = 600
)
