package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/proto/client"

	"github.com/cluster-registry/sdk/access"
)

// Dialer opens connections through a tunnel server's frontend, authenticating with a client
// certificate. It is an access.TunnelDialer.
//
// Every connection a Dialer opens is a konnectivity tunnel of its own (one Proxy stream, as
// konnectivity's single-use client makes), but the streams share one gRPC connection to the
// frontend, made on the first dial and made again, through the frontend's address, after it
// breaks. A reader of a thousand tunnelled members therefore keeps one TLS session to the
// frontend, not a thousand, and gRPC writes what many members' connections send in one go
// (BenchmarkTunnel). Close ends that connection and every tunnel on it.
type Dialer struct {
	// Address is the tunnel server's frontend, as host:port.
	Address string
	// TLS holds the client certificate the frontend asks for and the CA that verifies the
	// frontend's own serving certificate.
	TLS *tls.Config

	mu     sync.Mutex
	conn   *grpc.ClientConn
	closed bool
}

// dialBackstop bounds a dial whose context has no deadline, as konnectivity's client does: a
// tunnel server that never answers a dial must not hold its caller for ever.
const dialBackstop = 30 * time.Second

// DialContext opens one connection to address through the tunnel: address is the name the tunnel
// routes by (access.TunnelAddress), not where the agent dials, which the tunnel server decides.
// Each connection has a tunnel stream of its own, which closes with it; a connection outlives
// ctx, which bounds only the dial.
func (d *Dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	if network != "tcp" {
		return nil, &DialError{Server: d.Address, Address: address, Err: fmt.Errorf("network %q: a tunnel carries tcp only", network)}
	}
	cc, err := d.client()
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, dialBackstop)
		defer cancel()
	}
	// The stream's own lifetime is the connection's, not the dial's: a kept connection to the
	// member must not end with the request that opened it. Until the dial is answered, ctx's end
	// ends the stream too, and with it the server's half-made dial.
	streamCtx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	c, err := openTunnel(streamCtx, cc, address)
	if !stop() || err != nil {
		cancel()
		if ctx.Err() != nil {
			err = fmt.Errorf("tunnel dial not answered: %w", context.Cause(ctx))
		}
		return nil, d.dialError(address, err)
	}
	c.cancel = cancel
	return c, nil
}

// client is the Dialer's gRPC connection to the frontend, made on first use. gRPC reconnects it
// after a break, through the frontend's address, so a reader that lost one of several tunnel
// servers behind it reaches another on its next dial.
func (d *Dialer) client() (*grpc.ClientConn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.closed:
		return nil, &DialError{Server: d.Address, Err: net.ErrClosed}
	case d.conn != nil:
		return d.conn, nil
	case d.TLS == nil:
		return nil, errors.New("tunnel dialer has no TLS config: the tunnel server's frontend asks for a client certificate")
	}
	cc, err := grpc.NewClient("passthrough:///"+d.Address,
		grpc.WithTransportCredentials(credentials.NewTLS(d.TLS)),
		// A fixed window turns gRPC's bandwidth estimation off, whose pings would otherwise
		// follow the small reads a probe makes; it is as large as the estimate's greatest.
		grpc.WithInitialWindowSize(windowSize), grpc.WithInitialConnWindowSize(windowSize),
		// One connection carries every member's tunnels: a frontend gone silent (its host lost,
		// a balancer's idle cut) is found by pings, not by TCP's retransmissions some minutes on.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: frontendKeepalive, Timeout: 20 * time.Second}),
		// A tunnel is a conversation with one agent: never replayed, in part, on another stream.
		grpc.WithDisableRetry(),
	)
	if err != nil {
		return nil, &DialError{Server: d.Address, Err: err}
	}
	d.conn = cc
	return cc, nil
}

// windowSize is the flow-control window of each tunnel stream and of the connection they share.
const windowSize = 4 << 20

// frontendKeepalive is how often a Dialer pings an idle frontend connection. Server's frontend
// permits pings this often.
const frontendKeepalive = 30 * time.Second

// Close ends the Dialer's connection to the frontend, and with it every connection it opened.
// Dials after Close fail.
func (d *Dialer) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.conn == nil {
		return nil
	}
	err := d.conn.Close()
	d.conn = nil
	return err
}

// openTunnel asks the frontend for a tunnel to address on a stream of cc's own, and waits for
// the answer.
func openTunnel(ctx context.Context, cc *grpc.ClientConn, address string) (*conn, error) {
	stream, err := client.NewProxyServiceClient(cc).Proxy(ctx)
	if err != nil {
		return nil, err
	}
	random := rand.Int64()
	err = stream.Send(&client.Packet{Type: client.PacketType_DIAL_REQ, Payload: &client.Packet_DialRequest{
		DialRequest: &client.DialRequest{Protocol: "tcp", Address: address, Random: random},
	}})
	if err != nil {
		return nil, streamError(stream, err)
	}
	for {
		pkt, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		switch pkt.Type {
		case client.PacketType_DIAL_RSP:
			rsp := pkt.GetDialResponse()
			if rsp.GetRandom() != random {
				continue // not this dial's: nothing else is asked on this stream
			}
			if rsp.GetError() != "" {
				return nil, errors.New(rsp.GetError())
			}
			return &conn{stream: stream, id: rsp.GetConnectID()}, nil
		case client.PacketType_DIAL_CLS:
			return nil, errors.New("the tunnel server closed the dial")
		}
	}
}

// streamError is the reason a Send on stream failed: gRPC's Send says only io.EOF, and the
// status the server ended the stream with comes from Recv.
func streamError(stream client.ProxyService_ProxyClient, err error) error {
	if _, rerr := stream.Recv(); rerr != nil && status.Code(rerr) != codes.OK {
		return rerr
	}
	return err
}

// dialError is err as the Dialer's callers see it: a DialError, whose reason is
// access.ErrAgentDisconnected when no agent answers for address.
func (d *Dialer) dialError(address string, err error) error {
	// konnectivity's server says so in these words when no agent answers for the host
	// (pkg/server's ErrNotFound). It is also a refused connection, as a stopped API server's is:
	// client-go's reflectors then retry their watch from where it was, where any other dial error
	// makes them list everything again (and tell every object again).
	if strings.Contains(err.Error(), "No agent available") {
		err = fmt.Errorf("%w (%w)", access.ErrAgentDisconnected, syscall.ECONNREFUSED)
	}
	return &DialError{Server: d.Address, Address: address, Err: err}
}

// DialError is a dial through the tunnel that the tunnel server or the agent refused or could not
// make: no agent is connected for the address, the agent could not reach its API server, or the
// server refused the address.
type DialError struct {
	Server, Address string
	Err             error
}

func (e *DialError) Error() string {
	if e.Address == "" {
		return fmt.Sprintf("tunnel server %s: %v", e.Server, e.Err)
	}
	return fmt.Sprintf("through tunnel server %s to %s: %v", e.Server, e.Address, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }
