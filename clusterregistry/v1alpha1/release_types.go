package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Release delivers a set of Kubernetes objects to the members that a placement decision of its
// cluster set (its namespace) chose, and keeps them there: the releases controller
// (`clusterregistry controllers --controllers releases`, package delivery) applies them to each
// member with server-side apply, watches what it applied there for health and drift, rolls a new
// revision out in waves, and removes the objects from a member that leaves the decision or when
// the Release is deleted. No agent runs on the members.
//
// A Release reaches only its own namespace's members, through the credentials that the
// controller's Resolver follows from their Clusters: whoever may create Releases in a cluster set
// acts on its members with the power of those members' accounts.
//
// Per-member detail is in ReleaseStatusSlices of the same namespace, labelled
// clusterregistry.k8s.io/release=NAME, at most 100 members each.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=rrel,categories=clusterregistry
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, not an official Kubernetes API; see https://github.com/cluster-registry/sdk"
// +kubebuilder:metadata:annotations="clusterregistry.k8s.io/schema-version=22"
// +kubebuilder:printcolumn:name="Placement",type=string,JSONPath=`.spec.placement.name`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Members",type=integer,JSONPath=`.status.members`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Progressing")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule=`self.metadata.name.size() <= 63`,message="a Release's name is at most 63 characters: it labels every object the Release applies"
// +kubebuilder:validation:XValidation:rule=`!has(self.spec.dependsOn) || self.spec.dependsOn.all(d, d.name != self.metadata.name)`,message="spec.dependsOn names the Release itself: a Release cannot wait for itself",fieldPath=".spec.dependsOn"
type Release struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what to deliver, where, and how.
	Spec ReleaseSpec `json:"spec"`

	// status is how the delivery stands. Clients other than the releases controller should treat
	// it as read-only.
	// +optional
	Status ReleaseStatus `json:"status,omitempty"`
}

// ReleaseSpec is what a Release delivers, where, and how.
type ReleaseSpec struct {
	// source is what to deliver.
	Source ReleaseSource `json:"source"`

	// placement is where: the members of a placement decision of the Release's namespace.
	Placement ReleasePlacement `json:"placement"`

	// dependsOn are Releases of the same cluster set that must be Ready on a member, at their
	// current revision, before this Release is applied there: per member, so a slow member holds
	// only itself. Removed from a member, this Release goes first, its dependencies after. A
	// cycle stalls every Release in it (Stalled DependencyCycle, naming the cycle).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	DependsOn []ReleaseDependency `json:"dependsOn,omitempty"`

	// targetNamespace is the namespace of the namespaced objects that name none; "default" when
	// empty, as kubectl apply would.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	TargetNamespace string `json:"targetNamespace,omitempty"`

	// createNamespace makes targetNamespace on each member where it does not exist, before
	// anything is applied there (Argo CD's CreateNamespace, Helm's --create-namespace). The
	// namespace is left in place when the Release is deleted or leaves the member: it may hold
	// what others put there. The member's account must be allowed to create namespaces (join's
	// accounts are when joined with --allow-namespace-creation); a member whose account may not
	// fails, naming the permission.
	// +optional
	CreateNamespace bool `json:"createNamespace,omitempty"`

	// rollout says how a new revision reaches the members; all at once when unset.
	// +optional
	Rollout *ReleaseRollout `json:"rollout,omitempty"`

	// drift says what to do when an object applied to a member is changed there by someone else;
	// Correct when unset.
	// +optional
	Drift *ReleaseDrift `json:"drift,omitempty"`

	// health judges the objects of the kinds it names, where kstatus (which judges the built-in
	// kinds and any object with standard conditions) cannot: a custom resource whose operator
	// reports its own way. For an object of a kind named here, inProgress is evaluated first,
	// then failed, then current; the first that holds gives its status, and none InProgress.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Health []ReleaseHealthCheck `json:"health,omitempty"`

	// feedback reads values from the members' copies of the Release's objects (a Service's
	// load-balancer address, an operator's reported version) into each member's entry in the
	// status slices, from the controller's watch caches: no polling. Each value is cut to 256
	// characters.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Feedback []ReleaseFeedback `json:"feedback,omitempty"`

	// overrides change the rendered objects on the members they choose (manifests, and charts in
	// Render mode), after rendering: another hostname, replica count or image registry per
	// region. A member's revision (the label on its objects, its entry in status) includes the
	// overrides that choose it, so changing an override rolls out only to those members. A patch
	// that does not apply stalls the Release (InvalidOverride), naming the override and the
	// object.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Overrides []ReleaseOverride `json:"overrides,omitempty"`

	// divide divides named workloads' replicas across the members (a Deployment of 30 replicas
	// as 15, 10 and 5 by weight), where without it each member runs the count the workload was
	// written with. Each member's share overrides the workload's spec.replicas there, after
	// spec.overrides, and shows in its status (shares) and in diff release. A division whose
	// workload the Release does not have stalls the Release (InvalidDivision), as does one whose
	// /spec/replicas spec.drift.ignore leaves to the members (an autoscaler's: divide its bounds
	// with spec.overrides instead; see docs/rollouts.md).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Divide []ReleaseDivision `json:"divide,omitempty"`

	// departureGraceSeconds is how long a member that left the decision because of its health
	// (its Cluster not Ready when it left) keeps the Release's objects once its replacement is
	// in place: they are removed only when every member of the decision is Ready at the
	// revision and this long has passed since the member left, and only while the member is
	// Ready again (nothing is attempted on a member that cannot be reached). Until then its
	// status is Departed, saying what it waits for. Deliberate departures (the member excluded
	// or unselected while Ready, its Cluster deleted, the Release deleted or re-placed) remove
	// at once. 600 (Karmada's graceful eviction) when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DepartureGraceSeconds *int64 `json:"departureGraceSeconds,omitempty"`

	// deletionPolicy says what happens to the objects on the members when the Release is deleted
	// or a member leaves the decision: Delete (the default) removes them, Orphan leaves them.
	// +optional
	// +kubebuilder:validation:Enum=Delete;Orphan
	DeletionPolicy ReleaseDeletionPolicy `json:"deletionPolicy,omitempty"`

	// suspend, when true, stops applying and removing: the members keep what they have.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// ReleaseSource is what a Release delivers: exactly one of its fields.
//
// +kubebuilder:validation:XValidation:rule=`[has(self.manifests), has(self.configMap), has(self.chart)].filter(x, x).size() == 1`,message="set exactly one of manifests, configMap and chart"
type ReleaseSource struct {
	// manifests are the objects to deliver, inline. Each must have apiVersion, kind and
	// metadata.name.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Manifests []runtime.RawExtension `json:"manifests,omitempty"`

	// configMap holds the objects as YAML streams in a ConfigMap of the Release's namespace.
	// +optional
	ConfigMap *ReleaseConfigMapSource `json:"configMap,omitempty"`

	// chart is a Helm chart, rendered for each member with its values (render mode: the
	// objects are applied, watched and corrected as manifests are; nothing of Helm's is kept on
	// the members, and a chart with hooks is refused, naming them).
	// +optional
	Chart *ReleaseChartSource `json:"chart,omitempty"`
}

// ReleaseChartSource is a Helm chart and its values.
//
// +kubebuilder:validation:XValidation:rule=`[has(self.configMap), has(self.secret), has(self.repository)].filter(x, x).size() == 1`,message="set exactly one of configMap, secret and repository"
type ReleaseChartSource struct {
	// configMap holds the packaged chart (what helm package writes) in a ConfigMap of the
	// Release's namespace, as binary data.
	// +optional
	ConfigMap *ReleaseChartConfigMap `json:"configMap,omitempty"`
	// secret holds the packaged chart in a Secret of the Release's namespace (key "chart.tgz"
	// when empty), for a chart that is not for every reader of the set. It is read again within
	// a minute of a change.
	// +optional
	Secret *ReleaseChartConfigMap `json:"secret,omitempty"`
	// repository is where the chart is fetched from: an OCI registry or an HTTP chart
	// repository. Requests go only to the repository's own host: a redirect, or a chart the
	// index places on another host, is refused.
	// +optional
	Repository *ReleaseChartRepository `json:"repository,omitempty"`
	// values are the chart's values (an object), over the chart's own values.yaml.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	Values *runtime.RawExtension `json:"values,omitempty"`
	// valuesFrom are values kept in ConfigMaps and Secrets of the Release's namespace, each a
	// YAML map at its key, merged in order over the chart's own values; values and memberValues
	// go over them. A change to a ConfigMap named here is delivered at once; to a Secret, within
	// a minute.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	ValuesFrom []ReleaseValuesReference `json:"valuesFrom,omitempty"`
	// memberValues set values from each member's Cluster, over values: one Release serves
	// members that differ (by region, say). Members given the same values share one render.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	MemberValues []ReleaseMemberValue `json:"memberValues,omitempty"`
	// mode is how the chart reaches each member: Render (the default) renders it here and
	// applies, watches and corrects its objects as manifests are, with nothing of Helm's on the
	// member; Helm runs Helm's own install, upgrade and uninstall on each member (the release
	// is Helm's, in its Secrets there, so helm ls shows it; hooks run; a member is Ready when
	// Helm's wait finds its objects ready; drift is not corrected).
	// +optional
	// +kubebuilder:validation:Enum=Render;Helm
	Mode ReleaseChartMode `json:"mode,omitempty"`
}

// ReleaseValuesReference names chart values in a ConfigMap or Secret of the Release's namespace.
type ReleaseValuesReference struct {
	// kind is ConfigMap or Secret.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`
	// name is the ConfigMap's or Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key holds the values, a YAML map; "values.yaml" when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
	// optional: a missing ConfigMap, Secret or key adds no values, rather than stopping the
	// Release.
	// +optional
	Optional bool `json:"optional,omitempty"`
}

// ReleaseChartMode is how a chart reaches the members: Render or Helm.
type ReleaseChartMode string

const (
	// ChartModeRender renders the chart in the controller and applies its objects.
	ChartModeRender ReleaseChartMode = "Render"
	// ChartModeHelm runs Helm's own install and upgrade on each member.
	ChartModeHelm ReleaseChartMode = "Helm"
)

// ReleaseChartConfigMap names the ConfigMap (or Secret) and key of a packaged chart.
type ReleaseChartConfigMap struct {
	// name is the ConfigMap's (or Secret's) name, in the Release's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the binaryData (or, of a Secret, data) key of the packaged chart; "chart.tgz" when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// ReleaseChartRepository is a chart in an OCI registry or an HTTP chart repository.
//
// +kubebuilder:validation:XValidation:rule=`self.url.startsWith('oci://') != has(self.chart)`,message="chart names the chart in an HTTP repository's index; an oci:// url names the chart itself, without chart"
type ReleaseChartRepository struct {
	// url is the chart's repository in an OCI registry (oci://registry.example.com/charts/app)
	// or an HTTP chart repository, the URL its index.yaml is under (https://charts.example.com).
	// http:// is refused unless the controller allows plain HTTP.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^(oci|https|http)://[^/?#@]+(/[^?#]*)?$`
	URL string `json:"url"`
	// chart is the chart's name in an HTTP repository's index.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Chart string `json:"chart,omitempty"`
	// version is the chart's version, or a semantic version range such as "^1.2" or
	// ">=1.0.0 <2.0.0"; the newest version (not a pre-release) when empty. A range is resolved
	// again every few minutes, so a new matching version rolls out.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version,omitempty"`
	// digest pins the packaged chart: "sha256:" and its 64 hex digits. A chart with another
	// digest is refused.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	Digest string `json:"digest,omitempty"`
	// secretRef names a Secret of the Release's namespace with the repository's credentials:
	// a kubernetes.io/dockerconfigjson Secret (its entry for the repository's host is used), or
	// a kubernetes.io/basic-auth Secret whose clusterregistry.k8s.io/servers annotation names
	// the repository's host. Credentials go to no other host.
	// +optional
	SecretRef *ReleaseSecretReference `json:"secretRef,omitempty"`
}

// ReleaseSecretReference names a Secret of the Release's namespace.
type ReleaseSecretReference struct {
	// name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReleaseMemberValueFrom is what of a member's Cluster a member value takes.
// +kubebuilder:validation:Enum=Name;Label;Annotation;Version
type ReleaseMemberValueFrom string

const (
	// MemberValueName is the Cluster's name.
	MemberValueName ReleaseMemberValueFrom = "Name"
	// MemberValueLabel is one of the Cluster's labels ("" when it has none of that key).
	MemberValueLabel ReleaseMemberValueFrom = "Label"
	// MemberValueAnnotation is one of the Cluster's annotations ("" when it has none).
	MemberValueAnnotation ReleaseMemberValueFrom = "Annotation"
	// MemberValueVersion is the member's Kubernetes version, as the health controller reported
	// it in the Cluster's status.
	MemberValueVersion ReleaseMemberValueFrom = "Version"
)

// ReleaseMemberValue sets one chart value from each member's Cluster.
//
// +kubebuilder:validation:XValidation:rule=`(self.from == 'Label' || self.from == 'Annotation') == has(self.key)`,message="key is the label's or annotation's key: set it for Label and Annotation, and only for them"
type ReleaseMemberValue struct {
	// path is the value's dotted path in the chart's values, for example "region" or
	// "ingress.host".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`
	Path string `json:"path"`
	// from is what of the Cluster the value is: Name, Label, Annotation or Version.
	From ReleaseMemberValueFrom `json:"from"`
	// key is the label's or annotation's key.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key,omitempty"`
}

// ReleaseConfigMapSource names the ConfigMap whose data holds a Release's objects.
type ReleaseConfigMapSource struct {
	// name is the ConfigMap's name, in the Release's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the data key whose value is a YAML stream of objects; every key, in their sorted
	// order, when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// ReleasePlacement names a placement decision of the Release's namespace: exactly one field.
//
// +kubebuilder:validation:XValidation:rule=`has(self.name) != has(self.decisionKey)`,message="set exactly one of name and decisionKey"
type ReleasePlacement struct {
	// name is a Placement of the Release's namespace; its decision (the PlacementDecisions
	// labelled multicluster.x-k8s.io/decision-key=NAME) says where.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// decisionKey names the PlacementDecisions that another scheduler writes in the Release's
	// namespace, by their multicluster.x-k8s.io/decision-key label.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	DecisionKey string `json:"decisionKey,omitempty"`
}

// ReleaseRolloutStrategy is how a new revision reaches the members.
type ReleaseRolloutStrategy string

// Rollout strategies.
const (
	// RolloutAll applies a revision to every member at once.
	RolloutAll ReleaseRolloutStrategy = "All"
	// RolloutGroups applies it one of the decision's rollout groups (the Placement's
	// rolloutGroupSize) after the other, in order.
	RolloutGroups ReleaseRolloutStrategy = "Groups"
	// RolloutConcurrency applies it to maxConcurrency members at a time, in the decision's order.
	RolloutConcurrency ReleaseRolloutStrategy = "Concurrency"
)

// ReleaseRollout is how a new revision reaches the members: in waves, each of which must be
// applied and healthy, for soakSeconds, before the next starts.
type ReleaseRollout struct {
	// strategy is All (the default), Groups or Concurrency.
	// +optional
	// +kubebuilder:validation:Enum=All;Groups;Concurrency
	Strategy ReleaseRolloutStrategy `json:"strategy,omitempty"`

	// maxConcurrency is, with Concurrency, how many members (or what percentage of them,
	// rounded up) a wave has; 25% when unset.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxConcurrency *intstr.IntOrString `json:"maxConcurrency,omitempty"`

	// maxFailures is how many members of the rollout (or what percentage, rounded down) may fail
	// before it stops before the next wave; 0 when unset.
	// +optional
	// +kubebuilder:validation:XIntOrString
	MaxFailures *intstr.IntOrString `json:"maxFailures,omitempty"`

	// soakSeconds is how long a wave must stay healthy before the next starts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	SoakSeconds int32 `json:"soakSeconds,omitempty"`

	// progressDeadlineSeconds is how long a member may take to become healthy once applied
	// before it counts as failed (Timeout); 600 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// onFailure is what a rollout does past maxFailures: Stop (the default) stops before the
	// next wave and leaves the members already moved at the new revision; Rollback returns every
	// member already moved to the last revision that was Ready everywhere, in reverse wave order,
	// and does not try the failed revision again until the spec changes.
	// +optional
	// +kubebuilder:validation:Enum=Stop;Rollback
	OnFailure ReleaseFailurePolicy `json:"onFailure,omitempty"`

	// approval is Automatic (the default), or Manual: each wave of each revision waits until
	// someone approves it (clusterregistry rollout approve, which writes the
	// clusterregistry.k8s.io/approved annotation with the revision and wave).
	// +optional
	// +kubebuilder:validation:Enum=Automatic;Manual
	Approval ReleaseApproval `json:"approval,omitempty"`
}

// ReleaseFailurePolicy is what a rollout does past maxFailures.
type ReleaseFailurePolicy string

// Failure policies.
const (
	// FailureStop stops the rollout before its next wave.
	FailureStop ReleaseFailurePolicy = "Stop"
	// FailureRollback returns the members already moved to the last revision Ready everywhere.
	FailureRollback ReleaseFailurePolicy = "Rollback"
)

// ReleaseApproval says whether a rollout's waves wait for approval.
type ReleaseApproval string

// Approvals.
const (
	// ApprovalAutomatic begins each wave once the one before is done.
	ApprovalAutomatic ReleaseApproval = "Automatic"
	// ApprovalManual begins each wave once it is also approved.
	ApprovalManual ReleaseApproval = "Manual"
)

// ReleaseDriftPolicy is what to do about an object changed on a member by someone else.
type ReleaseDriftPolicy string

// Drift policies.
const (
	// DriftCorrect applies the object again, at once.
	DriftCorrect ReleaseDriftPolicy = "Correct"
	// DriftWarn reports the member Drifted and leaves the object as it is.
	DriftWarn ReleaseDriftPolicy = "Warn"
	// DriftIgnore neither reports nor corrects it.
	DriftIgnore ReleaseDriftPolicy = "Ignore"
)

// ReleaseDrift is what to do about objects changed on members by someone else.
type ReleaseDrift struct {
	// policy is Correct (the default), Warn or Ignore.
	// +optional
	// +kubebuilder:validation:Enum=Correct;Warn;Ignore
	Policy ReleaseDriftPolicy `json:"policy,omitempty"`

	// ignore lists fields, per kind, that others may own on the members: the controller does not
	// apply them (so it neither sets nor corrects them), for example a Deployment's
	// /spec/replicas under an autoscaler.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Ignore []ReleaseIgnoredFields `json:"ignore,omitempty"`
}

// ReleaseIgnoredFields are fields of one kind that a Release does not apply.
type ReleaseIgnoredFields struct {
	// group is the kind's API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the kind, for example Deployment.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// paths are JSON pointers (RFC 6901) to the fields, for example /spec/replicas.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`^/`
	Paths []string `json:"paths"`
}

// ReleaseHealthCheck says when an object of a kind is healthy, as CEL expressions over the
// object (self), as Flux's healthCheckExprs do. Each evaluation is bounded in cost, as the API
// server bounds a CRD's validation rules; an expression that does not compile stalls the Release
// (InvalidHealth), naming it.
type ReleaseHealthCheck struct {
	// group is the kind's API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the kind, as objects name it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// current holds when the object is healthy.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Current string `json:"current"`
	// inProgress holds when the object is on its way: neither healthy nor failed yet.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	InProgress string `json:"inProgress,omitempty"`
	// failed holds when the object failed: its member fails, as a Deployment past its deadline
	// does.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Failed string `json:"failed,omitempty"`
}

// ReleaseOverride is patches for the members a selector chooses.
type ReleaseOverride struct {
	// name names the override in members' revisions, status and errors.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// clusterSelector chooses the members by their Cluster's labels; every member when unset.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// cel, if set, chooses only the members for which it is true, as a Placement's cel does (the
	// same `cluster` variable and cost bound): cluster.labels["tier"] == "gold". A member for
	// which it cannot be evaluated (a missing key) is not chosen.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	CEL string `json:"cel,omitempty"`
	// patches are applied in order, each to the objects it targets.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Patches []ReleasePatch `json:"patches"`
}

// ReleasePatchType is how a patch is applied.
// +kubebuilder:validation:Enum=StrategicMerge;Merge;JSON
type ReleasePatchType string

// Patch types.
const (
	// PatchStrategicMerge is kubectl's strategic merge patch for the built-in kinds (lists of
	// containers merge by name); a JSON merge patch for other kinds.
	PatchStrategicMerge ReleasePatchType = "StrategicMerge"
	// PatchMerge is a JSON merge patch (RFC 7386).
	PatchMerge ReleasePatchType = "Merge"
	// PatchJSON is a JSON patch (RFC 6902): a list of operations.
	PatchJSON ReleasePatchType = "JSON"
)

// ReleasePatch is one patch of the objects it targets.
type ReleasePatch struct {
	// group is the targets' API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the targets' kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// name is the target's name; every object of the kind when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// type is how patch applies; StrategicMerge when unset.
	// +optional
	Type ReleasePatchType `json:"type,omitempty"`
	// patch is the patch, as JSON or YAML.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16384
	Patch string `json:"patch"`
}

// ReleaseFeedback is one value read from one object of the Release on each member.
type ReleaseFeedback struct {
	// name names the value in each member's status.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Name string `json:"name"`
	// group is the object's API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the object's kind.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// objectName is the object's name (its namespace is the one it was applied to).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ObjectName string `json:"objectName"`
	// jsonPath is what to read, as kubectl's -o jsonpath takes it:
	// {.status.loadBalancer.ingress[0].ip}. A path the object lacks reads as empty.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	JSONPath string `json:"jsonPath"`
}

// ReleaseFeedbackValue is a value spec.feedback read on a member.
type ReleaseFeedbackValue struct {
	// name is the feedback's name.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// value is what its path read (cut to 256 characters); empty when the object lacks it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value,omitempty"`
}

// ReleaseDependency is a Release another waits for.
type ReleaseDependency struct {
	// name is a Release of the same cluster set (namespace): a Release never waits for another
	// set's, so there is no namespace to give.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}

// ReleaseDeletionPolicy is what happens to a Release's objects on a member it no longer reaches.
type ReleaseDeletionPolicy string

// Deletion policies.
const (
	// DeletionDelete removes them, in the reverse of the order they were applied in.
	DeletionDelete ReleaseDeletionPolicy = "Delete"
	// DeletionOrphan leaves them, without the Release's labels' meaning: nothing watches them.
	DeletionOrphan ReleaseDeletionPolicy = "Orphan"
)

// ReleaseStatus is how a Release's delivery stands.
type ReleaseStatus struct {
	// observedGeneration is the generation of the spec that status reports on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// revision identifies what the spec delivers: a hash of the rendered objects. Each applied
	// object carries it in its clusterregistry.k8s.io/revision label.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Revision string `json:"revision,omitempty"`

	// conditions are Progressing (a rollout is under way), Available (every member runs the
	// revision, healthy), Degraded (some member failed, drifted or is unreachable) and Stalled
	// (the rollout stopped: too many failures, an invalid source, a decision that cannot be read).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// chart is the chart the revision delivers, when the source is a chart: its name, the
	// version a repository's range resolved to, and its digest.
	// +optional
	Chart *ReleaseChartStatus `json:"chart,omitempty"`

	// lastCompleteRevision is the newest revision whose rollout had every member Ready: the
	// revision an onFailure Rollback returns to. Only the releases controller writes it; the
	// history's records (ControllerRevisions) are trusted no further than it and their hashes.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	LastCompleteRevision string `json:"lastCompleteRevision,omitempty"`

	// members is how many members the decision names.
	// +optional
	Members int32 `json:"members,omitempty"`

	// ready is how many of them run the revision, healthy.
	// +optional
	Ready int32 `json:"ready,omitempty"`

	// phases counts the members by phase.
	// +optional
	// +listType=map
	// +listMapKey=phase
	// +kubebuilder:validation:MaxItems=16
	Phases []ReleasePhaseCount `json:"phases,omitempty"`

	// wave is the rollout's current wave, counted from 1, of waves.
	// +optional
	Wave int32 `json:"wave,omitempty"`
	// waves is how many waves the rollout of the revision has.
	// +optional
	Waves int32 `json:"waves,omitempty"`

	// divisions are the shares of spec.divide's Capacity divisions, as the releases controller
	// divided them for the decision's members, kept until the members or the division change.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Divisions []ReleaseDivisionStatus `json:"divisions,omitempty"`

	// worst are up to ten members that are not Ready, the worst first, with why.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Worst []ReleaseMemberStatus `json:"worst,omitempty"`
}

// ReleasePhaseCount is how many of a Release's members are in one phase.
type ReleasePhaseCount struct {
	// phase is the members' phase.
	Phase ReleaseMemberPhase `json:"phase"`
	// count is how many.
	Count int32 `json:"count"`
}

// ReleaseMemberPhase is where a Release stands on one member.
type ReleaseMemberPhase string

// Member phases.
const (
	// PhasePending: the member waits for its wave.
	PhasePending ReleaseMemberPhase = "Pending"
	// PhaseApplying: the revision is being applied.
	PhaseApplying ReleaseMemberPhase = "Applying"
	// PhaseProgressing: applied, not yet healthy.
	PhaseProgressing ReleaseMemberPhase = "Progressing"
	// PhaseReady: applied and healthy.
	PhaseReady ReleaseMemberPhase = "Ready"
	// PhaseDrifted: an object was changed on the member by someone else (drift policy Warn, or
	// being corrected).
	PhaseDrifted ReleaseMemberPhase = "Drifted"
	// PhaseDegraded: the member was Ready at the revision for its wave's soak and is not healthy
	// now (reason HealthLost: an object lost its health, as when a Node dies under its Pods;
	// ObjectFailed: an object says it failed; or the failure class of a new apply of the same
	// revision). It is no failure of the rollout:
	// the progress deadline is for reaching health, so nothing stops or rolls back for it, and
	// the member is Ready again once healthy.
	PhaseDegraded ReleaseMemberPhase = "Degraded"
	// PhaseFailed: the apply failed, an object failed, or it did not become healthy in time.
	PhaseFailed ReleaseMemberPhase = "Failed"
	// PhaseUnreachable: the member could not be reached; revision is what it last had.
	PhaseUnreachable ReleaseMemberPhase = "Unreachable"
	// PhaseRemoving: the member left the decision, or the Release is being deleted, and its
	// objects are being removed.
	PhaseRemoving ReleaseMemberPhase = "Removing"
	// PhaseDeparted: the member left the decision because of its health; it keeps the objects
	// until its replacement is Ready and the departure grace has passed (the message says which
	// it waits for), or comes back into the decision with them.
	PhaseDeparted ReleaseMemberPhase = "Departed"
)

// Failure classes, the reason of a Failed or Unreachable member.
const (
	FailureUnreachable = "Unreachable"
	FailureForbidden   = "Forbidden"
	FailureConflict    = "Conflict"
	FailureInvalid     = "Invalid"
	FailureTimeout     = "Timeout"
	// FailureClusterNotFound: the decision names a Cluster the cluster set does not have (or
	// one outside the controller's members): an Unreachable member that no network fix mends.
	FailureClusterNotFound = "ClusterNotFound"
	// FailureCredentialsUnavailable: the member's credentials did not resolve, or the reader's
	// trust policy refused them (a Secret pinned to another server, an exec plugin or file not
	// allowed): an Unreachable member that only its Cluster, its Secret or the controller's trust
	// flags can mend. The message says which, as the Resolver does.
	FailureCredentialsUnavailable = "CredentialsUnavailable"
)

// Unreachable reports whether a failure class leaves the member Unreachable (what it last had
// stays), rather than Failed at the revision.
func Unreachable(class string) bool {
	return class == FailureUnreachable || class == FailureClusterNotFound || class == FailureCredentialsUnavailable
}

// ReleaseMemberStatus is how a Release stands on one member.
type ReleaseMemberStatus struct {
	// cluster is the member's Cluster, in the Release's namespace.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// phase is where the Release stands there.
	Phase ReleaseMemberPhase `json:"phase"`
	// revision is the revision last applied there; empty before the first.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Revision string `json:"revision,omitempty"`
	// reason is a CamelCase word: a failure class (Unreachable, ClusterNotFound,
	// CredentialsUnavailable, Forbidden, Conflict, Invalid, Timeout) or why the member is in its
	// phase.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message says more, in the member's own words where it answered (escaped, cut).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// lastApplied is when the revision was last applied there.
	// +optional
	LastApplied *metav1.Time `json:"lastApplied,omitempty"`
	// departedAt is when the member left the decision because of its health (phase Departed):
	// the departure grace counts from it.
	// +optional
	DepartedAt *metav1.Time `json:"departedAt,omitempty"`
	// feedback are the values spec.feedback read from the objects there.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Feedback []ReleaseFeedbackValue `json:"feedback,omitempty"`
	// shares are the member's shares of spec.divide, as it was last applied with them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Shares []ReleaseMemberShare `json:"shares,omitempty"`
	// objects are the objects applied there, with their health; in ReleaseStatusSlices only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1000
	Objects []ReleaseObjectStatus `json:"objects,omitempty"`
}

// ReleaseObjectStatus is one applied object on one member.
type ReleaseObjectStatus struct {
	// group is the object's API group; empty for the core group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// version is the object's API version within its group.
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version"`
	// resource is the object's resource on the member, for example deployments.
	// +kubebuilder:validation:MaxLength=253
	Resource string `json:"resource"`
	// kind is the object's kind.
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// namespace is the object's namespace; empty for a cluster-scoped object.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name is the object's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// status is its health as kstatus computes it (Current, InProgress, Failed, Terminating,
	// NotFound, Unknown), or Error when it could not be applied.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Status string `json:"status,omitempty"`
	// message says why, when it is not Current.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Release conditions.
const (
	ReleaseProgressing = "Progressing"
	ReleaseAvailable   = "Available"
	ReleaseDegraded    = "Degraded"
	ReleaseStalled     = "Stalled"
)

// ReleaseList is a list of Releases.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type ReleaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Release `json:"items"`
}

// ReleaseStatusSlice holds the per-member status of one Release, at most 100 members: a
// Release's slices are the ReleaseStatusSlices of its namespace labelled
// clusterregistry.k8s.io/release=NAME, ordered by their clusterregistry.k8s.io/slice-index
// label, and owned by the Release. The releases controller writes them; others read them.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=clusterregistry
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, not an official Kubernetes API; see https://github.com/cluster-registry/sdk"
// +kubebuilder:metadata:annotations="clusterregistry.k8s.io/schema-version=22"
// +kubebuilder:printcolumn:name="Release",type=string,JSONPath=`.metadata.labels.clusterregistry\.k8s\.io/release`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReleaseStatusSlice struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// members are the members' status, sorted by cluster.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Members []ReleaseMemberStatus `json:"members,omitempty"`
}

// ReleaseStatusSliceList is a list of ReleaseStatusSlices.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type ReleaseStatusSliceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReleaseStatusSlice `json:"items"`
}

// Labels of what a Release applies and of its status slices.
const (
	// ReleaseLabel is the Release's name, on its ReleaseStatusSlices and on every object it
	// applies to a member.
	ReleaseLabel = "clusterregistry.k8s.io/release"
	// ReleaseNamespaceLabel is the Release's namespace (its cluster set), on every object it
	// applies to a member.
	ReleaseNamespaceLabel = "clusterregistry.k8s.io/release-namespace"
	// RestartedAtAnnotation, on a Release, asks the releases controller to deliver it again now
	// to every member whose wave has begun (clusterregistry rollout restart writes it): each new
	// value is one such pass.
	RestartedAtAnnotation = "clusterregistry.k8s.io/restartedAt"
	// ApprovedAnnotation, on a Release with approval Manual, is the last wave approved:
	// "REVISION/WAVE" (clusterregistry rollout approve writes it). Waves up to WAVE of that
	// revision may begin; an approval of another revision approves nothing.
	ApprovedAnnotation = "clusterregistry.k8s.io/approved"
	// RevisionLabel is the revision that last applied an object to a member.
	RevisionLabel = "clusterregistry.k8s.io/revision"
	// SliceIndexLabel orders a Release's status slices.
	SliceIndexLabel = "clusterregistry.k8s.io/slice-index"
	// ReplicaLabel names, on a ReleaseStatusSlice, the replica of a sharded releases controller
	// that wrote it (a hash of the replica's identity): each replica reports the members it owns
	// in slices of its own. Slices without it are an unsharded controller's.
	ReplicaLabel = "clusterregistry.k8s.io/replica"
)

// ReleaseChartStatus is the chart a Release's revision delivers.
type ReleaseChartStatus struct {
	// name is the chart's name, from its Chart.yaml.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// version is the chart's version, from its Chart.yaml.
	// +kubebuilder:validation:MaxLength=128
	Version string `json:"version"`
	// digest is the packaged chart's digest: "sha256:" and 64 hex digits.
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest"`
}
