package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Placement chooses members of its cluster set (its namespace) by policy. A scheduler (the
// SDK's runs in `clusterregistry controllers --controllers placements`) records what it chose as
// SIG Multicluster's PlacementDecision slices in the same namespace, labelled with the decision
// key multicluster.x-k8s.io/decision-key=NAME, and reports in status why candidates are in or
// out. Consumers (fan-out, per-member caches, multicluster-runtime controllers) follow the
// decision, not the policy.
//
// A Placement chooses only among the Clusters of its own namespace: a decision names only its
// own cluster set's members, so that whoever may write Placements in one set cannot send a
// consumer's workloads and credentials to another set's members.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=rpl,categories=clusterregistry
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, not an official Kubernetes API; see https://github.com/cluster-registry/sdk"
// +kubebuilder:metadata:annotations="clusterregistry.k8s.io/schema-version=22"
// +kubebuilder:printcolumn:name="Count",type=integer,JSONPath=`.spec.count`
// +kubebuilder:printcolumn:name="Chosen",type=integer,JSONPath=`.status.chosen`
// +kubebuilder:printcolumn:name="Satisfied",type=string,JSONPath=`.status.conditions[?(@.type=="Satisfied")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Satisfied")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Placement struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the policy: which of the cluster set's Clusters to choose.
	// +optional
	Spec PlacementSpec `json:"spec,omitempty"`

	// status is what the scheduler last decided, and why. Clients other than the scheduler
	// should treat it as read-only.
	// +optional
	Status PlacementStatus `json:"status,omitempty"`
}

// PlacementSpec is a placement policy. Its zero value chooses every Ready Cluster of the set.
// Package placement decides with it (placement.Policy is this type), with no I/O, so that a
// policy can be tried as a dry run before it is written.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.spread) || has(self.count)`,message="spread needs count: without one, every fitting candidate is chosen, whatever its domain",fieldPath=".spread"
type PlacementSpec struct {
	// selector keeps the Clusters whose labels match; every Cluster when unset.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// cel, if set, keeps the Clusters for which it is true. It sees `cluster`, with `name`,
	// `namespace`, `labels`, `annotations`, `version` (status.version), `ready` (`status`
	// and `reason` of the Ready condition), `properties` (status.properties, name to value)
	// and, while they are no older than maxResourceAgeSeconds, `resources`: `nodes` and
	// `readyNodes`, and `capacity`, `allocatable`, `requested`, `largestFree` and `free`
	// (allocatable less requested), each a map of resource name to a double (cpu in cores,
	// memory in bytes). For example
	// `cluster.labels["tier"] == "gold" && cluster.version.startsWith("v1.3")`, or
	// `has(cluster.resources) && cluster.resources.free["cpu"] >= 4.0`. An expression
	// that does not compile, or costs too much, makes the Placement Misconfigured.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CEL string `json:"cel,omitempty"`

	// include names Clusters (NAME, or SET/NAME) that are candidates whatever selector and cel
	// say; they are chosen before others. exclude and readiness still apply.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	Include []string `json:"include,omitempty"`

	// exclude names Clusters (NAME, or SET/NAME) that are never chosen.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MaxLength=253
	Exclude []string `json:"exclude,omitempty"`

	// count, if set, chooses at most that many; every fitting candidate when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Count *int32 `json:"count,omitempty"`

	// spread, with count, spreads the chosen across the values of a label.
	// +optional
	Spread *PlacementSpread `json:"spread,omitempty"`

	// tolerations keep a chosen member chosen while it is not Ready, for a time, by the reason
	// of its Ready condition. The time counts from when the member stopped being Ready, whatever
	// reasons it passes through since (an API server that restarts is Unreachable, then
	// Starting, then Ready): one outage is one outage. A reason of an outage that no toleration
	// names (Unreachable, NotReady, Starting and AgentDisconnected) is tolerated for
	// DefaultTolerationSeconds (300 s), as Kubernetes' default tolerations keep a Pod on a node
	// that blips; name the reason with seconds 0 to not tolerate it. A member not chosen before
	// is never chosen while not Ready, and one whose endpoint leads to another cluster
	// (IdentityChanged) leaves at once whatever the tolerations say.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []PlacementToleration `json:"tolerations,omitempty"`

	// fit, if set, chooses only members with room: what each must have free, in total and on
	// one Node, by its status.resources. A member chosen before stays while its allocatable
	// still holds what fit asks: what it runs for the placement counts in its requested, and
	// filling it moves nothing.
	// +optional
	Fit *PlacementFit `json:"fit,omitempty"`

	// prefer, if set, orders candidates by score, the sum of each preference's weight times
	// its expression's value; higher first, ties broken as without it (a hash of the
	// placement and the Cluster, then the name). Members chosen before stay chosen whatever
	// their score, unless rebalance says otherwise.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Prefer []PlacementPreference `json:"prefer,omitempty"`

	// maxResourceAgeSeconds bounds how old a member's status.resources (its lastObservedTime)
	// may be for fit and prefer to judge it; DefaultMaxResourceAgeSeconds (900) when unset.
	// A member whose figures are older, or missing, is not chosen by fit nor scored by prefer,
	// and its reason says so (ResourcesStale, ResourcesUnknown); one chosen before stays.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxResourceAgeSeconds *int64 `json:"maxResourceAgeSeconds,omitempty"`

	// rebalance, if set, lets members chosen before give way to better-scored candidates (by
	// prefer), at most once per cooldown. Without it a chosen member stays while it fits.
	// +optional
	Rebalance *PlacementRebalance `json:"rebalance,omitempty"`

	// rolloutGroupSize, if set, puts the chosen into groups of at most this size, in order, for
	// rollouts in stages; a member keeps its group while it stays chosen.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RolloutGroupSize *int32 `json:"rolloutGroupSize,omitempty"`
}

// PlacementSpread spreads the chosen members across the values of a label (a region, a zone).
type PlacementSpread struct {
	// label is the label whose values are the domains. A Cluster without it is not chosen.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Label string `json:"label"`

	// maxSkew is how many more members one domain may have than the one with fewest, among the
	// domains that have candidates; 1 when zero.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxSkew int32 `json:"maxSkew,omitempty"`
}

// DefaultTolerationSeconds is how long a placement keeps a chosen member that is Unreachable,
// NotReady or Starting when none of its tolerations names that reason: Kubernetes' default
// tolerations of not-ready and unreachable nodes.
const DefaultTolerationSeconds int64 = 300

// OutageReasons are the Ready condition's reasons that a placement tolerates by default
// (DefaultTolerationSeconds) when none of its tolerations names them: a member that cannot be
// reached or whose API server is not ready, not one whose credentials or identity changed.
var OutageReasons = []string{ReasonUnreachable, ReasonNotReady, ReasonStarting, ReasonAgentDisconnected}

// PlacementToleration keeps a chosen member chosen while its Ready condition is not True, with
// a reason.
type PlacementToleration struct {
	// reason is the Ready condition's reason tolerated (Unreachable, NotProbed, ...); every
	// reason when empty, IdentityChanged excepted, which is never tolerated.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule=`self != 'IdentityChanged'`,message="IdentityChanged is never tolerated: the member's endpoint leads to another cluster"
	Reason string `json:"reason,omitempty"`

	// seconds is how long after the member stopped being Ready (the Ready condition's last
	// transition) it stays chosen; for as long as the reason lasts when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Seconds *int64 `json:"seconds,omitempty"`
}

// PlacementStatus is what the scheduler last decided for a Placement.
type PlacementStatus struct {
	// observedGeneration is the generation of the spec that status reports on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions are Satisfied (True when count members are chosen, or, without count, when
	// the decision is written) and Misconfigured (True when the policy cannot be used; the
	// decision last written is then kept, not emptied).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// chosen is how many members the decision names.
	// +optional
	Chosen int32 `json:"chosen,omitempty"`

	// lastRebalanceTime is when a rebalance last moved members: the next may come a cooldown
	// after it.
	// +optional
	LastRebalanceTime *metav1.Time `json:"lastRebalanceTime,omitempty"`

	// decisionKey is the value of the multicluster.x-k8s.io/decision-key label on the
	// PlacementDecisions that hold the decision: the Placement's name.
	// +optional
	DecisionKey string `json:"decisionKey,omitempty"`

	// candidates counts the cluster set's Clusters by the one reason each is in or out of the
	// decision (Chosen, Kept, Tolerated, Included; Excluded, Selector, CEL, NotReady,
	// OverCount, Spread, DoesNotFit, ResourcesUnknown, ResourcesStale, Unscored, Rebalanced). `clusterregistry explain-placement NAME` lists them one by one.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=32
	Candidates []PlacementReasonCount `json:"candidates,omitempty"`

	// scores are the prefer scores of up to 90 of the members the decision chose, the highest
	// first (ties by name), then of up to ten of the best-scored candidates it left out, each
	// with its reason. They are the scores the decision weighed when it chose these members,
	// kept while the members they list as chosen are still chosen and as many: a member's
	// capacity moving, which moves its score, writes nothing. Empty without prefer.
	// `clusterregistry explain-placement NAME` scores every candidate as it is now.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=100
	Scores []PlacementScore `json:"scores,omitempty"`
}

// PlacementScore is one candidate's score by a Placement's prefer.
type PlacementScore struct {
	// cluster is the candidate's Cluster.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// score is the sum of each preference's weight times its value, in four significant
	// figures, as explain-placement shows it.
	// +kubebuilder:validation:MaxLength=32
	Score string `json:"score"`
	// reason is why it is in (Chosen, Tolerated, Included) or out (OverCount, Spread, Rebalanced,
	// ...) of the decision.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
}

// How many of a Placement's status.scores are of chosen members at most, and how many of
// candidates left out.
const (
	MaxPlacementScoresChosen  = 90
	MaxPlacementScoresLeftOut = 10
)

// PlacementReasonCount is how many candidates a Placement's decision has for one reason.
type PlacementReasonCount struct {
	// reason is why these candidates are in or out.
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// count is how many.
	Count int32 `json:"count"`
}

// Placement conditions.
const (
	// PlacementSatisfied is True when the decision chose count members (or, without count, when
	// it is written). Reasons: ReasonSatisfied, ReasonNotEnoughCandidates, ReasonNotDecided,
	// ReasonDecisionNotWritten.
	PlacementSatisfied = "Satisfied"
	// PlacementMisconfigured is True when the policy cannot be used: a selector or a CEL
	// expression that does not parse. Reason ReasonInvalidPolicy, or ReasonValidPolicy when False.
	PlacementMisconfigured = "Misconfigured"
)

// Reasons of Placement conditions.
const (
	ReasonSatisfied           = "Satisfied"
	ReasonNotEnoughCandidates = "NotEnoughCandidates"
	ReasonNotDecided          = "NotDecided"
	// ReasonDecisionNotWritten: the decision could not be written (a PlacementDecision of the
	// key belongs to another scheduler, or the registry refused); the message says why.
	ReasonDecisionNotWritten = "DecisionNotWritten"
	ReasonInvalidPolicy      = "InvalidPolicy"
	ReasonValidPolicy        = "ValidPolicy"
)

// PlacementList is a list of Placements.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type PlacementList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the Placements in the list.
	Items []Placement `json:"items"`
}
