package tunnel_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
	"github.com/cluster-registry/sdk/tunnel"
)

// Two tunnel servers behind one address, as a Service or a load balancer puts them: the agent
// connects to both (konnectivity's server count), and with one of them gone the readers reach the
// member through the other: a reader that keeps its Dialer as well as new ones.
func TestTwoServersBehindOneAddress(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t) // for its CAs, its logs and its agent runner; its own server stays idle
	agentCA := testcerts.NewCA("tunnel-agents-ha")
	r.agentCAFile = writeFile(t, r.dir, "ha-agent-ca.crt", agentCA.PEM)
	var servers [2]*tunnel.Server
	var stops [2]func()
	frontends, agents := &balancer{}, &balancer{}
	for i := range servers {
		servers[i], stops[i] = r.serve(t, tunnel.ServerOptions{
			FrontendTLS: &tls.Config{Certificates: []tls.Certificate{r.readers.Serving("127.0.0.1")}, ClientCAs: r.readers.Pool()},
			AgentTLS:    &tls.Config{Certificates: []tls.Certificate{agentCA.Serving("127.0.0.1")}},
			ServerID:    []string{"a", "b"}[i], ServerCount: 2,
		}, frontends, agents)
	}
	r.frontend, r.agents = frontends.start(t), agents.start(t)

	ns := fleettest.CopySet(t, lf, "member-1")
	host := access.TunnelHost(ns, "member-1-agent")
	r.startAgent(t, r.agentAccount(t, ns, "member-1-agent", memberAddress(t)), host)
	tunnelled(t, ns, "member-1-agent")
	require.Eventually(t, func() bool { return servers[0].Connected(host) && servers[1].Connected(host) }, time.Minute, 50*time.Millisecond,
		"the agent did not connect to both servers behind the address")
	c := cluster(t, ns)
	readAll := func(n int) {
		for range n {
			require.NoError(t, listNamespaces(ctx, resolverFor(t, r.dialer()), c)) // a fresh connection each
		}
	}
	// A reader that keeps its Dialer, as the controllers do: its one connection to the frontend
	// reaches one of the two servers.
	kept := resolverFor(t, r.dialer())
	was := [2]int32{frontends.served[0].Load(), frontends.served[1].Load()}
	require.NoError(t, listNamespaces(ctx, kept, c))
	its := 0
	if frontends.served[1].Load() > was[1] {
		its = 1
	}
	require.Equal(t, was[its]+1, frontends.served[its].Load(), "the kept Dialer made more than one connection to the frontend")
	readAll(4)
	require.Positive(t, frontends.served[0].Load())
	require.Positive(t, frontends.served[1].Load(), "the balancer sent no reader to the second server")

	// That server goes: the kept reader reconnects through the address to the other, and new
	// readers go there too.
	stops[its]()
	other := 1 - its
	before := frontends.served[other].Load()
	var err error
	require.Eventually(t, func() bool {
		err = listNamespaces(ctx, kept, c)
		return err == nil
	}, time.Minute, 100*time.Millisecond, "the kept reader did not reach the member through the other server; last error: %v", err)
	readAll(4)
	require.GreaterOrEqual(t, frontends.served[other].Load(), before+5, "with its server gone, the readers did not go through the other")
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p, data, 0o600))
	return p
}

// serve runs a Server with opts on two listeners of its own, each added to its balancer, and
// returns it with a func that stops it.
func (r *rig) serve(t *testing.T, opts tunnel.ServerOptions, frontends, agents *balancer) (*tunnel.Server, func()) {
	t.Helper()
	opts.Registry = kubernetes.NewForConfigOrDie(lf.Registry.Config)
	opts.Logger = logr.Discard()
	server, err := tunnel.NewServer(opts)
	require.NoError(t, err)
	fl, al := listen(t), listen(t)
	frontends.add(fl.Addr().String())
	agents.add(al.Addr().String())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, fl, al) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-done)
		})
	}
	t.Cleanup(stop)
	return server, stop
}

// balancer is a TCP load balancer in front of backends: each connection goes to the next one in
// turn that accepts it, as a Service's does.
type balancer struct {
	backends []string
	next     atomic.Int32
	served   [2]atomic.Int32
}

func (b *balancer) add(addr string) { b.backends = append(b.backends, addr) }

func (b *balancer) start(t *testing.T) string {
	t.Helper()
	l := listen(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go b.forward(c)
		}
	}()
	return l.Addr().String()
}

func (b *balancer) forward(c net.Conn) {
	defer c.Close()
	for range b.backends {
		i := int(b.next.Add(1)) % len(b.backends)
		up, err := net.Dial("tcp", b.backends[i])
		if err != nil {
			continue // that backend is gone: the next one
		}
		b.served[i].Add(1)
		defer up.Close()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		_, _ = io.Copy(c, up)
		return
	}
}
