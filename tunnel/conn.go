package tunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"sigs.k8s.io/apiserver-network-proxy/konnectivity-client/proto/client"
)

// conn is one connection through the tunnel: a konnectivity Proxy stream whose dial was
// answered. Read takes the stream's packets in the reader's own goroutine, and Write sends them
// from the writer's, so a byte crosses no goroutine of the tunnel's on its way.
type conn struct {
	stream client.ProxyService_ProxyClient
	id     int64
	cancel context.CancelFunc

	readMu  sync.Mutex
	rest    []byte // what the last packet held beyond the last Read
	readErr error

	sendMu sync.Mutex
	closed atomic.Bool
}

var _ net.Conn = (*conn)(nil)

// maxPacket bounds the data one packet carries: a larger Write is sent in pieces, well under
// gRPC's default limit on a received message.
const maxPacket = 64 << 10

func (c *conn) Read(b []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	for len(c.rest) == 0 {
		if c.readErr != nil {
			return 0, c.readErr
		}
		pkt, err := c.stream.Recv()
		switch {
		case err != nil:
			c.readErr = c.ended(err)
		case pkt.Type == client.PacketType_DATA && pkt.GetData().GetConnectID() == c.id:
			c.rest = pkt.GetData().GetData()
		case pkt.Type == client.PacketType_CLOSE_RSP:
			c.readErr = io.EOF // the member's side closed
		}
	}
	n := copy(b, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

func (c *conn) Write(b []byte) (int, error) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	written := 0
	for written < len(b) {
		if c.closed.Load() {
			return written, net.ErrClosed
		}
		chunk := b[written:min(len(b), written+maxPacket)]
		err := c.stream.Send(&client.Packet{Type: client.PacketType_DATA, Payload: &client.Packet_Data{
			Data: &client.Data{ConnectID: c.id, Data: chunk},
		}})
		if err != nil {
			return written, c.ended(err) // Recv, in Read, tells why
		}
		written += len(chunk)
	}
	return written, nil
}

// ended is what a stream's err means to the connection's user: net.ErrClosed once Close has been
// called, io.EOF when the server ended the stream, the stream's status otherwise.
func (c *conn) ended(err error) error {
	switch {
	case c.closed.Load():
		return net.ErrClosed
	case errors.Is(err, io.EOF):
		return io.EOF
	case status.Code(err) == codes.Canceled:
		return net.ErrClosed
	}
	return fmt.Errorf("tunnel connection: %w", err)
}

// Close ends the stream. konnectivity's server closes the agent's connection to the member when
// a frontend's stream ends, as it does on a CLOSE_REQ; ending it needs no lock, so a Write that
// waits for the member's window does not hold Close.
func (c *conn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.cancel()
	}
	return nil
}

// The addresses are the tunnel's, not a socket's: there is no local port, and the remote end is
// named by the agent's identity.
func (c *conn) LocalAddr() net.Addr  { return tunnelAddr("local") }
func (c *conn) RemoteAddr() net.Addr { return tunnelAddr(fmt.Sprintf("connection %d", c.id)) }

type tunnelAddr string

func (a tunnelAddr) Network() string { return "konnectivity" }
func (a tunnelAddr) String() string  { return string(a) }

// A stream has no deadlines; konnectivity's own connections have none either. Callers bound
// their requests with contexts, which close the connection.
var errNoDeadlines = errors.New("a tunnel connection has no deadlines")

func (c *conn) SetDeadline(time.Time) error      { return errNoDeadlines }
func (c *conn) SetReadDeadline(time.Time) error  { return errNoDeadlines }
func (c *conn) SetWriteDeadline(time.Time) error { return errNoDeadlines }
