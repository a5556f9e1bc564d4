package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Cluster is a member cluster in the registry: where its Kubernetes API server is, which CA signs
// its serving certificate, and pointers to the credentials a caller uses to reach it. It never
// holds the credentials themselves. The namespace a Cluster lives in is its cluster set: the
// grouping and authorization boundary for reading and writing registry entries.
//
// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=rcl,categories=clusterregistry
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved, not an official Kubernetes API; see https://github.com/cluster-registry/sdk"
// +kubebuilder:metadata:annotations="clusterregistry.k8s.io/schema-version=22"
// +kubebuilder:printcolumn:name="Display Name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Tunnel Agent",type=string,priority=1,JSONPath=`.spec.kubernetesApiEndpoints.tunnel.agent`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Last Report",type=date,priority=1,JSONPath=`.status.lastProbeTime`
// +kubebuilder:printcolumn:name="Credentials Expire",type=string,priority=1,JSONPath=`.status.credentialsExpireAt`
// +kubebuilder:printcolumn:name="Nodes",type=integer,priority=1,JSONPath=`.status.resources.nodes`
// +kubebuilder:printcolumn:name="CPU Requested",type=string,priority=1,JSONPath=`.status.resources.requested.cpu`
// +kubebuilder:printcolumn:name="CPU Allocatable",type=string,priority=1,JSONPath=`.status.resources.allocatable.cpu`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the member cluster: how to reach its API server and how to authenticate to it.
	// +optional
	// +kubebuilder:default={}
	Spec ClusterSpec `json:"spec,omitempty"`

	// status is what active controllers last observed about the member cluster. Clients other than
	// those controllers should treat it as read-only.
	// +optional
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterSpec is the registered, user-supplied description of a member cluster.
//
// Its struct-valued fields default to {}: server-side apply writes null where a manager gives up
// the last field it owned inside one, and the server replaces a null with a field's default
// instead of rejecting it.
type ClusterSpec struct {
	// displayName is a user-friendly name for the cluster, shown by tools in place of
	// metadata.name. It need not be unique.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	DisplayName string `json:"displayName,omitempty"`

	// kubernetesApiEndpoints says where the cluster's Kubernetes API server is and how to verify
	// its serving certificate.
	// +optional
	// +kubebuilder:default={}
	KubernetesAPIEndpoints KubernetesAPIEndpoints `json:"kubernetesApiEndpoints,omitempty"`

	// authInfo points to the credentials a caller may use to authenticate to the cluster's API
	// server. It holds pointers only; inline credentials are rejected.
	// +optional
	// +kubebuilder:default={}
	AuthInfo AuthInfo `json:"authInfo,omitempty"`
}

// The rules on serverAddress and caBundle sit on the enclosing object, reporting at the field,
// because the API server repeats a failing string's value in its error and these may hold secrets
// (user info in a URL, a pasted private key); for an object it leaves the value out.

// KubernetesAPIEndpoints is where a cluster's Kubernetes API server is, as seen from different
// client networks, and the CA bundle that verifies it.
//
// +kubebuilder:validation:XValidation:rule=`!has(self.caBundle) || size(self.caBundle) == 0 || (self.caBundle.matches(r'^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$') && self.caBundle.startsWith('LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t'))`,messageExpression=`self.caBundle.matches(r'^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$') ? 'caBundle must hold PEM-encoded CERTIFICATE blocks, beginning with -----BEGIN CERTIFICATE-----' : 'caBundle takes PEM certificates encoded as base64 on one line (as base64 -w0 ca.crt prints them)'`,fieldPath=".caBundle"
// +kubebuilder:validation:XValidation:rule=`!has(self.caBundle) || !(self.caBundle.contains('UFJJVkFURSBLRV') || self.caBundle.contains('BSSVZBVEUgS0VZ') || self.caBundle.contains('QUklWQVRFIEtFW'))`,message="caBundle must not hold a private key",fieldPath=".caBundle"
type KubernetesAPIEndpoints struct {
	// serverEndpoints lists the API server's address for each client network. A caller uses the
	// entry whose clientCIDR holds its own IP address, the longest prefix winning; 0.0.0.0/0 and
	// ::/0 match every client. Each clientCIDR appears at most once.
	// +optional
	// +listType=map
	// +listMapKey=clientCIDR
	// +kubebuilder:validation:MaxItems=32
	ServerEndpoints []ServerAddressByClientCIDR `json:"serverEndpoints,omitempty"`

	// caBundle holds one or more PEM-encoded CA certificates that verify the API server's serving
	// certificate. When empty, callers use their system roots.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	CABundle []byte `json:"caBundle,omitempty"`

	// tunnel, when set, says that the member dials out and is reached only through a tunnel: an
	// agent on the member connects to the reader's tunnel server, and readers dial the member's
	// API server through it. serverEndpoints then give the API server's address as the member's
	// own network sees it, which the TLS handshake verifies, end to end through the tunnel.
	// Where the tunnel server is, and how a reader authenticates to it, are each reader's own
	// settings, never the Cluster's: whoever edits a Cluster cannot send its readers' connections
	// elsewhere. When unset, readers dial serverEndpoints directly.
	// +optional
	Tunnel *Tunnel `json:"tunnel,omitempty"`
}

// Tunnel says under which identity a member's tunnel agent connects.
type Tunnel struct {
	// agent is the name of the ServiceAccount, in this Cluster's namespace of the registry, that
	// the member's tunnel agent authenticates as. The tunnel server lets an agent speak only for
	// its own ServiceAccount, so a Cluster naming another member's agent reaches that member,
	// whose serving certificate then fails the TLS handshake before any credential is sent.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Agent string `json:"agent"`
}

// ServerAddressByClientCIDR is the API server's address as seen from one client network.
//
// +kubebuilder:validation:XValidation:rule=`self.serverAddress.matches(r'^(https://)?([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?(/[^?#\s]*)?$')`,message="serverAddress must be an https URL (https://host[:port][/path]) or host[:port]; other schemes, user info, query and fragment are not allowed",fieldPath=".serverAddress"
type ServerAddressByClientCIDR struct {
	// clientCIDR is the client network this entry serves, as a canonical IPv4 or IPv6 CIDR
	// (host bits zero, for example 10.0.0.0/8 or 2001:db8::/32).
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`isCIDR(self) && string(cidr(self).masked()) == self`,message="clientCIDR must be a canonical IPv4 or IPv6 CIDR with host bits zero, such as 10.0.0.0/8 or 2001:db8::/32"
	ClientCIDR string `json:"clientCIDR"`

	// serverAddress is the API server's address: an https URL (https://host[:port][/path]) or a
	// bare host[:port], for which https and port 443 are implied. Other schemes, user info, query
	// strings and fragments are rejected.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	ServerAddress string `json:"serverAddress"`
}

// AuthInfo holds pointers to the credentials for a cluster's API server.
type AuthInfo struct {
	// providers lists the ways a caller may authenticate, in the registrant's order. Each caller
	// picks the first provider whose type it prefers and can resolve: a controller may prefer a
	// Secret or a projected token, a person an exec plugin or a local kubeconfig. Names are unique.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Providers []AuthProviderConfig `json:"providers,omitempty"`
}

// AuthProviderConfig is one way to authenticate to a cluster: a provider type and the pointers that
// type needs to find the credentials.
type AuthProviderConfig struct {
	// name identifies this provider within the cluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// type says which kind of provider this is, and so how config is read.
	// +required
	Type AuthProviderType `json:"type"`

	// config holds the provider type's settings: where its credentials are (a Secret's name, a file
	// path, an exec plugin's command), never the credentials. Keys that name a credential (token,
	// apiToken, password, secretAccessKey, client-key-data, ...) and values holding a private key or
	// a token are rejected, and so are exec arguments that pass a credential (--client-secret=...,
	// --password ...): a guard against pasted credentials, not a proof that none is stored.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !(k.lowerAscii().replace('-', '').replace('_', '').replace('.', '').matches('token|passw|passphrase|secret|credential|privatekey|apikey|accesskey|clientkey|keydata|certificatedata|tlskey|bearer') && !k.lowerAscii().replace('-', '').replace('_', '').replace('.', '').matches('(name|namespace|ref|path|file|dir|env|url|audience)$')))`,messageExpression=`'config key "' + self.filter(k, k.lowerAscii().replace('-', '').replace('_', '').replace('.', '').matches('token|passw|passphrase|secret|credential|privatekey|apikey|accesskey|clientkey|keydata|certificatedata|tlskey|bearer') && !k.lowerAscii().replace('-', '').replace('_', '').replace('.', '').matches('(name|namespace|ref|path|file|dir|env|url|audience)$'))[0] + '" names a credential; config holds pointers to credentials (a Secret\'s name, a file\'s path), not credentials'`
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !(self[k].contains('PRIVATE KEY') || self[k].contains('.eyJ')))`,messageExpression=`'config["' + self.filter(k, self[k].contains('PRIVATE KEY') || self[k].contains('.eyJ'))[0] + '"] holds a private key or a token; config holds pointers to credentials, not credentials'`
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !(self[k].contains('UFJJVkFURSBLRV') || self[k].contains('BSSVZBVEUgS0VZ')))`,messageExpression=`'config["' + self.filter(k, self[k].contains('UFJJVkFURSBLRV') || self[k].contains('BSSVZBVEUgS0VZ'))[0] + '"] holds a private key or a token; config holds pointers to credentials, not credentials'`
	// +kubebuilder:validation:XValidation:rule=`!('args' in self) || !self['args'].lowerAscii().matches('(^|[" ])--?[a-z0-9_.-]*(token|passw(or)?d|passphrase|secret|credentials?|bearer|(api|access|private|secret|client|signing)key|[-_.]key|key[-_.]?data)(=|"| |$)')`,messageExpression=`'config["args"] ' + self['args'].lowerAscii().find('(^|[" ])--?[a-z0-9_.-]*(token|passw(or)?d|passphrase|secret|credentials?|bearer|(api|access|private|secret|client|signing)key|[-_.]key|key[-_.]?data)(=|"| |$)').replace('"', '').replace('=', '').replace(' ', '') + ' passes a credential on the command line, for every reader of the cluster set to see; have the plugin read it on the reader\'s side (a file, its environment)'`,fieldPath=`['args']`
	// +kubebuilder:validation:XValidation:rule=`self.all(k, !(self[k].contains('QUklWQVRFIEtFW')))`,messageExpression=`'config["' + self.filter(k, self[k].contains('QUklWQVRFIEtFW'))[0] + '"] holds a private key or a token; config holds pointers to credentials, not credentials'`
	Config map[string]string `json:"config,omitempty"`
}

// AuthProviderType names a kind of auth provider. The well-known names are the ProviderType
// constants; tool authors may register their own.
type AuthProviderType struct {
	// name is the provider type, such as secret, kubeconfig-secret, kubeconfig-file, exec or
	// token-file.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ClusterStatus is what active controllers last observed about a member cluster.
type ClusterStatus struct {
	// conditions are the latest observations of the cluster's state. Ready says whether the
	// cluster's API server answered its last probe.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// version is the Kubernetes version the cluster's API server last reported, such as v1.36.3.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`

	// lastProbeTime is when the probe whose outcome this status records began. A health
	// controller probes far more often than it writes: it writes the status when the outcome
	// changes, and otherwise once per heartbeat, so while it runs this is at most a heartbeat old
	// (kubectl's column says Last Report, which is what it is).
	// +optional
	LastProbeTime *metav1.Time `json:"lastProbeTime,omitempty"`

	// clusterID identifies the cluster the endpoints lead to: the UID of its kube-system
	// namespace, as KEP-2149 (ClusterId) and Karmada use. A health controller records it on first
	// sight; if the endpoints later lead to a cluster with another ID, Ready turns False with
	// reason IdentityChanged. Remove the field to accept the new cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ClusterID string `json:"clusterID,omitempty"`

	// credentialsExpireAt is when the credentials that a health controller last reached the
	// cluster with expire, when they say (a token's exp, a client certificate's NotAfter); unset
	// when they do not. A rotator renews join's tokens well before (clusterregistry rotate).
	// +optional
	CredentialsExpireAt *metav1.Time `json:"credentialsExpireAt,omitempty"`

	// resources is what the cluster's Nodes hold and its Pods request, written by a capacity
	// controller (package capacity); unset until one has observed the cluster.
	// +optional
	Resources *ClusterResources `json:"resources,omitempty"`

	// properties are what the cluster says of itself in the About API's ClusterProperty
	// objects (about.k8s.io, KEP-2149), written by a capacity controller where the member
	// serves them; unset where it does not. Placements' CEL reads them as cluster.properties.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Properties []ClusterStatusProperty `json:"properties,omitempty"`
}

// ClusterList is a list of Clusters.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// items are the Clusters in the list.
	Items []Cluster `json:"items"`
}
