package agent

import (
	"fmt"
	"net"
	"strconv"
)

// Audience is the audience an agent's token is bound to, unless the tunnel server is told another
// (tunnel.ServerOptions.Audience): a token minted for the registry's API server, or for anything
// else, does not open a tunnel, and an agent's token is worth nothing to the registry's API.
const Audience = "tunnel.clusterregistry.k8s.io"

// DestinationAnnotation, on an agent's ServiceAccount in the registry, says where in its member's
// network the agent dials: the member's API server, as host:port. Whoever joins the member writes
// it (clusterregistry join --tunnel); a Cluster's editor cannot, so no Cluster can make an agent
// dial another host or port of its member's network.
const DestinationAnnotation = "tunnel.clusterregistry.k8s.io/destination"

// DefaultDestination is where an agent in a Pod of its member dials the member's API server.
const DefaultDestination = "kubernetes.default.svc:443"

// Version is the konnectivity release whose agent Manifests run, and DefaultImage its image.
const (
	Version      = "v0.34.0"
	DefaultImage = "registry.k8s.io/kas-network-proxy/proxy-agent:" + Version
)

// Name names the agent's objects on the member: its Deployment, ServiceAccount and the Secret of
// its token.
const Name = "clusterregistry-tunnel-agent"

// The agent's Secret on the member holds its token under TokenKey and the tunnel server's CA under
// CAKey, mounted at MountPath.
const (
	TokenKey  = "token"
	CAKey     = "ca.crt"
	MountPath = "/var/run/clusterregistry-tunnel"
)

// TokensRole is the Role, in each cluster set of the registry with tunnelled members, that lets a
// renewer mint tokens of the set's agents and of no other ServiceAccount: join lists each agent in
// it, and the controllers' chart binds the rotation controller to it.
const TokensRole = "clusterregistry-tunnel-agents"

// Spec is one agent: whom it answers for, and the tunnel server it dials.
type Spec struct {
	// Namespace is the agent's namespace on the member.
	Namespace string
	// Host is the name it answers for: access.TunnelHost of its ServiceAccount.
	Host string
	// Server is the tunnel server's agent address, host:port, as the member's network reaches it;
	// ServerCA, in PEM, verifies it.
	Server   string
	ServerCA []byte
	// Image is the agent's container image; DefaultImage when empty.
	Image string
	// Annotations go on each of the agent's objects (whose they are).
	Annotations map[string]string
}

// Validate says what is missing or malformed, naming the field.
func (s Spec) Validate() error {
	switch {
	case s.Namespace == "":
		return fmt.Errorf("agent.Spec.Namespace is empty")
	case s.Host == "":
		return fmt.Errorf("agent.Spec.Host is empty: the name the agent answers for (access.TunnelHost)")
	case len(s.ServerCA) == 0:
		return fmt.Errorf("agent.Spec.ServerCA is empty: the CA that verifies the tunnel server's agent address")
	}
	if _, _, err := serverHostPort(s.Server); err != nil {
		return fmt.Errorf("agent.Spec.Server: %w", err)
	}
	return nil
}

// Args are the agent's flags, with its token and the server's CA under dir (MountPath in its
// Pod): its identity claimed exactly as the tunnel server admits it, and kept syncing, so that it
// connects to every server behind the address, and again to one that restarts.
func (s Spec) Args(dir string) []string {
	host, port, _ := serverHostPort(s.Server)
	return []string{
		"--proxy-server-host=" + host,
		"--proxy-server-port=" + port,
		"--ca-cert=" + dir + "/" + CAKey,
		"--service-account-token-path=" + dir + "/" + TokenKey,
		"--agent-id=" + s.Host,
		"--agent-identifiers=host=" + s.Host,
		"--sync-forever",
	}
}

func serverHostPort(address string) (string, string, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil || host == "" {
		return "", "", fmt.Errorf("%q is not host:port, the tunnel server's agent address", address)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return "", "", fmt.Errorf("%q: the port must be 1-65535", address)
	}
	return host, port, nil
}
