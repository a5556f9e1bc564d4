package tunnel_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// The member cannot be dialled: its Cluster, as localfleet registered it (dialled directly),
// probes Unreachable, its address refusing the connection, while the same member read through
// the tunnel is Ready. What the other tests read of it went through the tunnel or nowhere.
func TestTheMemberCannotBeDialled(t *testing.T) {
	realservers.Required(t)
	r := startRig(t)
	direct := fleettest.CopySet(t, lf, "member-1")
	got := probe(t, direct, resolverFor(t, r.dialer()))
	require.Equal(t, v1alpha1.ReasonUnreachable, got.Reason, "%+v", got)
	require.Contains(t, got.Message, "connection refused")

	tunnelled := fleettest.CopySet(t, lf, "member-1")
	r.tunnelledMember(t, tunnelled, memberAddress(t))
	require.Equal(t, v1alpha1.ReasonReachable, probe(t, tunnelled, resolverFor(t, r.dialer())).Reason)
}

// The member is read through the tunnel, with TLS end to end: the stand-in between the agent and
// the member's API server carries the whole exchange and never sees the bearer token.
func TestReadThroughTheTunnel(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	rec := record(t, memberAddress(t))
	host, agent, _ := r.tunnelledMember(t, ns, rec.addr)
	c := cluster(t, ns)

	t.Run("without a tunnel the Cluster does not resolve", func(t *testing.T) {
		_, err := resolverFor(t, nil).Resolve(ctx, c)
		require.ErrorIs(t, err, access.ErrNoTunnel)
		require.ErrorContains(t, err, `agent "member-1-agent"`)
	})

	resolver := resolverFor(t, r.dialer())
	var err error
	assert.Eventually(t, func() bool { err = listNamespaces(ctx, resolver, c); return err == nil }, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, err)
	n, tokenSeen := rec.carried(memberToken(t, ns))
	require.Positive(t, n, "the stand-in in the tunnel's path carried nothing: the member was not read through the tunnel")
	require.False(t, tokenSeen, "the member's bearer token crossed the tunnel in the clear")

	t.Run("the agent dials its member's API server only", func(t *testing.T) {
		_, err := r.dialer().DialContext(ctx, "tcp", net.JoinHostPort(access.TunnelHost(ns, "member-1-agent"), "22"))
		require.ErrorContains(t, err, "reaches its member's API server only")
		_, err = r.dialer().DialContext(ctx, "tcp", "10.0.0.1:443")
		require.ErrorContains(t, err, "reaches members' API servers only")
	})

	t.Run("the frontend admits only readers with a client certificate", func(t *testing.T) {
		before := rec.connections()
		anonymous := r.dialer()
		anonymous.TLS = &tls.Config{RootCAs: r.readers.Pool()}
		_, err := anonymous.DialContext(ctx, "tcp", access.TunnelAddress(ns, "member-1-agent"))
		require.Error(t, err)
		stranger := r.dialer()
		stranger.TLS.Certificates = []tls.Certificate{testcerts.NewCA("someone-else").Client("a-reader")}
		_, err = stranger.DialContext(ctx, "tcp", access.TunnelAddress(ns, "member-1-agent"))
		require.Error(t, err)
		require.Equal(t, before, rec.connections(), "a refused reader's dial reached the member")
	})

	t.Run("health probes it Ready through the tunnel", func(t *testing.T) {
		cond := probe(t, ns, resolver)
		require.Equal(t, v1alpha1.ReasonReachable, cond.Reason, cond.Message)
	})

	t.Run("the connection outlives its request", func(t *testing.T) {
		before := rec.connections()
		for range 5 {
			require.NoError(t, listNamespaces(ctx, resolver, c))
		}
		require.Equal(t, before, rec.connections(), "each request dialled the member again: connections were not kept")
	})

	t.Run("with its agent gone, health says AgentDisconnected", func(t *testing.T) {
		require.NoError(t, agent.Process.Kill())
		require.Eventually(t, func() bool { return !r.server.Connected(host) }, time.Minute, 50*time.Millisecond)
		fresh := resolverFor(t, r.dialer()) // no kept connection
		require.ErrorIs(t, listNamespaces(ctx, fresh, c), access.ErrAgentDisconnected)
		cond := probe(t, ns, fresh)
		require.Equal(t, v1alpha1.ReasonAgentDisconnected, cond.Reason, cond.Message)
	})
}

// An agent that authenticates as one ServiceAccount and claims another's identity is refused:
// the dials meant for that member never reach it.
func TestAnAgentSpeaksOnlyForItself(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	rogue := record(t, "")
	r.startAgent(t, r.agentAccount(t, ns, "rogue", rogue.addr), access.TunnelHost(ns, "member-1-agent"))
	claimed := access.TunnelHost(ns, "member-1-agent")
	require.Eventually(t, func() bool { return r.logged("refused a tunnel agent") || r.server.Connected(claimed) }, time.Minute, 50*time.Millisecond,
		"the tunnel server neither refused nor admitted the agent")
	tunnelled(t, ns, "member-1-agent")

	err := listNamespaces(ctx, resolverFor(t, r.dialer()), cluster(t, ns))
	require.Error(t, err)
	require.Zero(t, rogue.connections(), "a dial for member-1 reached the agent that claimed its identity")
	require.False(t, r.server.Connected(claimed))
	require.True(t, r.logged("claims agent ID"), "the refusal does not say what the agent claimed")
}

// An agent that answers for a member but leads elsewhere (here, a server with a CA of its own)
// fails the TLS handshake: no request, and so no credential, reaches what it leads to.
func TestARogueAgentFailsClosed(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	var requests atomic.Int32
	impostor := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { requests.Add(1) }))
	impostor.Listener.Close()
	impostor.Listener = bridgedListen(t)
	impostor.TLS = &tls.Config{Certificates: []tls.Certificate{testcerts.NewCA("impostor").Serving("127.0.0.1")}}
	impostor.StartTLS()
	t.Cleanup(impostor.Close)
	r.tunnelledMember(t, ns, impostor.Listener.Addr().String())

	var err error
	require.Eventually(t, func() bool {
		err = listNamespaces(ctx, resolverFor(t, r.dialer()), cluster(t, ns))
		var unknown x509.UnknownAuthorityError
		return errors.As(err, &unknown)
	}, time.Minute, 200*time.Millisecond, "want the member's CA to refuse the impostor; last error: %v", err)
	require.Zero(t, requests.Load(), "a request reached the impostor")
	cond := probe(t, ns, resolverFor(t, r.dialer()))
	require.Equal(t, v1alpha1.ReasonServerUntrusted, cond.Reason, cond.Message)
	require.Zero(t, requests.Load(), "a probe reached the impostor")
}
