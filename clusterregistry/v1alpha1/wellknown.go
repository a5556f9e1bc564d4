package v1alpha1

import corev1 "k8s.io/api/core/v1"

// Well-known auth provider type names. Each names a way to find credentials for a cluster; the
// multicluster package resolves them. Tool authors may register types of their own.
const (
	// ProviderTypeSecret reads a bearer token, or a client certificate and key, from a Secret named
	// by config "name" (and optionally "namespace").
	ProviderTypeSecret = "secret"
	// ProviderTypeKubeconfigSecret reads a kubeconfig from a Secret, following Cluster API's
	// convention: config "name" defaults to "<cluster>-kubeconfig", "key" to "value"; "context"
	// picks a context.
	ProviderTypeKubeconfigSecret = "kubeconfig-secret"
	// ProviderTypeKubeconfigFile reads a kubeconfig on the caller's machine: config "path" and
	// optionally "context".
	ProviderTypeKubeconfigFile = "kubeconfig-file"
	// ProviderTypeExec runs a client.authentication.k8s.io exec plugin: config "command", "args",
	// "env", "apiVersion", "provideClusterInfo" and "clusterConfig", run only as the caller's
	// access.ExecPlugin for the command allows.
	ProviderTypeExec = "exec"
	// ProviderTypeTokenFile reads a bearer token from config "path", rereading it as it rotates,
	// as for a projected service account token.
	ProviderTypeTokenFile = "token-file"
)

// Keys of the Secrets that providers of type ProviderTypeSecret read: the shapes of a
// service-account token Secret and of a TLS Secret, whose keys client-go names. join writes a
// member's token and CA under them, and the Rotator renews the token in place.
const (
	// SecretTokenKey holds a bearer token.
	SecretTokenKey = corev1.ServiceAccountTokenKey
	// SecretCAKey holds the PEM CA bundle that verifies the servers the credentials are pinned
	// to; when present it is used instead of the Cluster's caBundle.
	SecretCAKey = corev1.ServiceAccountRootCAKey
	// SecretCertKey and SecretKeyKey hold a client certificate and its key, in PEM.
	SecretCertKey = corev1.TLSCertKey
	SecretKeyKey  = corev1.TLSPrivateKeyKey
)

// KubeconfigSecretKey is the key of the kubeconfig in a Secret that a ProviderTypeKubeconfigSecret
// provider reads when its config names no "key": Cluster API's convention.
const KubeconfigSecretKey = "value"

// KubeconfigSecretName is the Secret that a ProviderTypeKubeconfigSecret provider of Cluster
// cluster reads when its config names none: "<cluster>-kubeconfig", Cluster API's convention.
func KubeconfigSecretName(cluster string) string { return cluster + "-kubeconfig" }

// Well-known condition types and reasons for ClusterStatus.Conditions.
const (
	// ConditionReady is True when the cluster's API server was reachable and usable, with the
	// prober's credentials, at its last probes.
	ConditionReady = "Ready"

	// ReasonReachable (True): the API server answered readyz and version with the credentials.
	ReasonReachable = "Reachable"
	// ReasonUnreachable: no connection could be made to the cluster's endpoint, or it did not
	// answer in time.
	ReasonUnreachable = "Unreachable"
	// ReasonNotReady: the API server answered, but its readiness checks fail; the message names
	// them.
	ReasonNotReady = "NotReady"
	// ReasonStarting: the API server answered, and only the checks of a server still starting
	// fail (its post-start hooks, with its informers' first sync and its storage client's first
	// connection): a member whose API server just restarted, not one that failed. Placements
	// tolerate it as they do NotReady.
	ReasonStarting = "Starting"
	// ReasonUnauthorized: the API server refused the credentials (401 or 403).
	ReasonUnauthorized = "Unauthorized"
	// ReasonCredentialsExpiring (True): the API server answered, and the credentials expire soon
	// without having been renewed; the message says when.
	ReasonCredentialsExpiring = "CredentialsExpiring"
	// ReasonCredentialsExpired: the API server refused credentials that say they have expired;
	// the message says since when. Renew them (join again, or run a rotator).
	ReasonCredentialsExpired = "CredentialsExpired"
	// ReasonCredentialsUnavailable: none of the cluster's auth providers could be resolved; the
	// message names them.
	ReasonCredentialsUnavailable = "CredentialsUnavailable"
	// ReasonNoEndpoint: no serverEndpoints entry matches the prober's client address.
	ReasonNoEndpoint = "NoEndpoint"
	// ReasonIdentityChanged: the endpoints now lead to a different cluster than status.clusterID
	// records.
	ReasonIdentityChanged = "IdentityChanged"
	// ReasonAgentDisconnected: the cluster is reached through a tunnel
	// (spec.kubernetesApiEndpoints.tunnel), and no agent of its is connected to the prober's
	// tunnel server: the member, or its network's way out, is down. An agent that is connected
	// while its API server does not answer is Unreachable. Placements tolerate it as they do
	// Unreachable.
	ReasonAgentDisconnected = "AgentDisconnected"
	// ReasonServerUntrusted: what answered at the endpoint has a serving certificate that the
	// cluster's CA does not verify: the endpoint, or the tunnel agent that answers for the
	// cluster, leads to another server than the cluster's. No credential was sent to it. It is
	// not an outage: placements tolerate it only where they name it.
	ReasonServerUntrusted = "ServerUntrusted"
	// ReasonNotProbed (Unknown): no controller has probed the cluster for too long.
	ReasonNotProbed = "NotProbed"
)

// ServersAnnotation, on a Secret that holds credentials for clusters, lists the API server
// addresses (comma separated) those credentials may be sent to. Whoever can edit a Cluster can
// change its endpoint; pinning the Secret to its servers keeps a redirected Cluster from harvesting
// the credentials.
const ServersAnnotation = GroupName + "/servers"

// TunnelAgentAnnotation, on a Secret that holds credentials for a member reached through a
// tunnel, names the agent (spec.kubernetesApiEndpoints.tunnel.agent) those credentials may be
// sent through; a Secret without it is sent to no tunnelled member, and one with it to no member
// dialled directly. A tunnelled member's server address is one in its own network: a Cluster's
// editor who could switch its agent, or drop the tunnel, would otherwise pick who answers for it.
const TunnelAgentAnnotation = GroupName + "/tunnel-agent"

// ServiceAccountAnnotation, on a Secret that holds a member's service-account token (as join
// stores it), names that service account on the member as namespace/name: a rotator renews the
// token by asking the member for a new one with the current one (package rotation).
const ServiceAccountAnnotation = GroupName + "/service-account"

// TokenExpiresAnnotation, on such a Secret, is when its token expires (RFC 3339), as join and the
// rotator record it for people and tools that may not read the token.
const TokenExpiresAnnotation = GroupName + "/token-expires"
