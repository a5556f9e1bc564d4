package access

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// ErrNoTunnel: the Cluster is reached through a tunnel (spec.kubernetesApiEndpoints.tunnel), and
// the Resolver has none (ResolverOptions.Tunnel).
var ErrNoTunnel = errors.New("reached through a tunnel, and this reader has none")

// ErrAgentDisconnected: the Cluster is reached through a tunnel, and no agent of its is connected
// to the tunnel server. A TunnelDialer's errors wrap it, so that callers tell this apart from an
// agent whose API server does not answer.
var ErrAgentDisconnected = errors.New("no tunnel agent of the member is connected")

// TunnelDialer opens connections through a tunnel server to members whose agents dial out to it.
// The tunnel package's Dialer is one; the Resolver asks it for TunnelAddress(namespace, agent,
// port), never for an address a Cluster names, so a Cluster's editor chooses neither the tunnel
// server nor the host the connection is for.
type TunnelDialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// TunnelHostSuffix ends every name the tunnel routes by. The .invalid top-level domain resolves
// nowhere (RFC 6761), so such a name can never be dialled by mistake outside the tunnel.
const TunnelHostSuffix = ".agent.clusterregistry.invalid"

// TunnelHost is the name a tunnel server routes to the agent that authenticates as ServiceAccount
// agent in namespace namespace of the registry: agent.namespace.agent.clusterregistry.invalid.
// Both are DNS labels, so the name is unambiguous.
func TunnelHost(namespace, agent string) string {
	return agent + "." + namespace + TunnelHostSuffix
}

// TunnelPort is the one port a tunnel offers on each agent's name: the member's API server,
// wherever in its network the agent dials it (the agent's destination, which the tunnel server
// keeps). Every other port is refused.
const TunnelPort = "443"

// TunnelAddress is what a reader dials through the tunnel to reach the member's API server:
// TunnelHost on TunnelPort.
func TunnelAddress(namespace, agent string) string {
	return net.JoinHostPort(TunnelHost(namespace, agent), TunnelPort)
}

// tunnelDial is how a Resolved config reaches a tunnelled Cluster: every connection is dialled
// through the Resolver's tunnel to the Cluster's agent, and TLS to the member's API server runs
// over it, verified as a direct connection is.
func (r *Resolver) tunnelDial(c *v1alpha1.Cluster) (func(ctx context.Context, network, address string) (net.Conn, error), error) {
	t := c.Spec.KubernetesAPIEndpoints.Tunnel
	if t == nil {
		return nil, nil
	}
	if r.opts.Tunnel == nil {
		return nil, fmt.Errorf("spec.kubernetesApiEndpoints.tunnel names agent %q: %w; give the reader a tunnel server (ResolverOptions.Tunnel, --tunnel-server)", t.Agent, ErrNoTunnel)
	}
	address := TunnelAddress(c.Namespace, t.Agent)
	tunnel := r.opts.Tunnel
	return func(ctx context.Context, network, _ string) (net.Conn, error) {
		return tunnel.DialContext(ctx, network, address)
	}, nil
}
