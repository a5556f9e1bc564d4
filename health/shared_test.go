package health_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// shared is the package's local fleet of one member, started by the first test that asks for it
// and stopped by TestMain after the last, so that the tests that change no member's servers
// share its servers, each in a cluster set of its own. A test that stops, restarts or
// reinstalls a member starts a fleet of its own.
var shared struct {
	once  sync.Once
	fleet *localfleet.Fleet
	err   error
}

// sharedSet is the shared fleet seen through a new cluster set of the test's own, holding copies
// of the named members' Clusters and of every credential Secret (no member when none is named):
// the helpers that take a fleet (fastOptions, ready, waitFor, setToken) work in that set. It
// must not be stopped: its servers are the shared fleet's.
func sharedSet(t *testing.T, members ...string) *localfleet.Fleet {
	t.Helper()
	integration(t)
	shared.once.Do(func() {
		shared.fleet, shared.err = localfleet.Start(context.Background(), localfleet.Options{Members: 1})
	})
	require.NoError(t, shared.err, "starting the package's local fleet")
	lf := shared.fleet
	ns := fleettest.NewSet(t, lf)
	if len(members) > 0 {
		ns = fleettest.CopySet(t, lf, members...)
	}
	return &localfleet.Fleet{Registry: lf.Registry, Namespace: ns, Members: lf.Members, Kubectl: lf.Kubectl}
}

// stopShared stops the shared fleet, if a test started it.
func stopShared() {
	if shared.fleet != nil {
		if err := shared.fleet.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the package's local fleet:", err)
		}
	}
}
