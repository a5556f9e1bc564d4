package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/pkg/client"

	"github.com/cluster-registry/sdk/access"
)

// Dialer opens connections through a tunnel server's frontend, authenticating with a client
// certificate. It is an access.TunnelDialer.
type Dialer struct {
	// Address is the tunnel server's frontend, as host:port.
	Address string
	// TLS holds the client certificate the frontend asks for and the CA that verifies the
	// frontend's own serving certificate.
	TLS *tls.Config
}

// DialContext opens one connection to address through the tunnel: address is the name the tunnel
// routes by (access.TunnelAddress), not where the agent dials, which the tunnel server decides.
// Each connection has a tunnel stream of its own, which closes with it; a connection outlives
// ctx, which bounds only the dial.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if d.TLS == nil {
		return nil, errors.New("tunnel dialer has no TLS config: the tunnel server's frontend asks for a client certificate")
	}
	// The tunnel's own lifetime is the connection's, not the dial's: a kept connection to the
	// member must not end with the request that opened it.
	t, err := client.CreateSingleUseGrpcTunnelWithContext(ctx, context.Background(), d.Address,
		grpc.WithTransportCredentials(credentials.NewTLS(d.TLS)))
	if err != nil {
		return nil, fmt.Errorf("tunnel server %s: %w", d.Address, err)
	}
	conn, err := t.DialContext(ctx, network, address)
	if err != nil {
		// konnectivity's server says so in these words when no agent answers for the host
		// (pkg/server's ErrNotFound), and its client passes the words on. It is also a refused
		// connection, as a stopped API server's is: client-go's reflectors then retry their watch
		// from where it was, where any other dial error makes them list everything again (and
		// tell every object again).
		if strings.Contains(err.Error(), "No agent available") {
			err = fmt.Errorf("%w (%w)", access.ErrAgentDisconnected, syscall.ECONNREFUSED)
		}
		return nil, &DialError{Server: d.Address, Address: address, Err: err}
	}
	return conn, nil
}

// DialError is a dial through the tunnel that the tunnel server or the agent refused or could not
// make: no agent is connected for the address, the agent could not reach its API server, or the
// server refused the address.
type DialError struct {
	Server, Address string
	Err             error
}

func (e *DialError) Error() string {
	return fmt.Sprintf("through tunnel server %s to %s: %v", e.Server, e.Address, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }
