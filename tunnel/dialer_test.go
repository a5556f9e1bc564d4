package tunnel_test

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// A Dialer's tunnels share one connection to the frontend, each its own stream: many member
// connections make one frontend connection, each reaches the member, and closing one ends the
// agent's connection to the member, so nothing is left open on the member's side.
func TestOneFrontendConnectionCarriesEveryTunnel(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	rec := record(t, memberAddress(t))
	r.tunnelledMember(t, ns, rec.addr)
	frontend := &balancer{}
	frontend.add(r.frontend)
	d := r.dialerAt(frontend.start(t))

	const n = 8
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := d.DialContext(ctx, "tcp", access.TunnelAddress(ns, "member-1-agent"))
		require.NoError(t, err)
		conns[i] = c
	}
	require.Eventually(t, func() bool { return rec.openConnections() == n }, time.Minute, 20*time.Millisecond,
		"the member's side saw %d of %d connections", rec.openConnections(), n)
	require.Equal(t, int32(1), frontend.served[0].Load(), "each tunnel made a connection to the frontend of its own")

	for _, c := range conns[:n/2] {
		require.NoError(t, c.Close())
	}
	require.Eventually(t, func() bool { return rec.openConnections() == n/2 }, time.Minute, 20*time.Millisecond,
		"closed tunnels left the agent's connections to the member open: %d open", rec.openConnections())
	_, err := conns[0].Write([]byte("after close"))
	require.ErrorIs(t, err, net.ErrClosed)

	require.NoError(t, d.Close())
	require.Eventually(t, func() bool { return rec.openConnections() == 0 }, time.Minute, 20*time.Millisecond,
		"the Dialer's Close left %d connections to the member open", rec.openConnections())
	_, err = d.DialContext(ctx, "tcp", access.TunnelAddress(ns, "member-1-agent"))
	require.ErrorIs(t, err, net.ErrClosed)
}
