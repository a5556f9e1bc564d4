package fleettest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/localfleet"
)

// Shared is a package's local fleet of Options, started by the first test that asks for it
// (Fleet) and stopped by TestMain after the last (Stop), so that unit tests run without one and
// the tests that need one share its servers. A test that changes it works in a cluster set of its
// own (CopySet); one that stops or reinstalls a member starts a fleet of its own.
type Shared struct {
	Options localfleet.Options

	once  sync.Once
	fleet *localfleet.Fleet
	err   error
}

// Fleet starts the shared fleet the first time it is asked for, and fails tb if it could not.
func (s *Shared) Fleet(tb testing.TB) *localfleet.Fleet {
	tb.Helper()
	s.once.Do(func() { s.fleet, s.err = localfleet.Start(context.Background(), s.Options) })
	require.NoError(tb, s.err, "starting the package's local fleet")
	return s.fleet
}

// Stop stops the shared fleet, if a test started it; for TestMain, after m.Run.
func (s *Shared) Stop() {
	if s.fleet == nil {
		return
	}
	if err := s.fleet.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the package's local fleet:", err)
	}
}

// Set is the shared fleet seen through a new cluster set of tb's own, holding copies of the
// named members' Clusters and of every credential Secret (no member when none is named), so that
// helpers that take a fleet work in that set. It must not be stopped: its servers are the shared
// fleet's.
func (s *Shared) Set(tb testing.TB, members ...string) *localfleet.Fleet {
	tb.Helper()
	lf := s.Fleet(tb)
	var ns string
	if len(members) > 0 {
		ns = CopySet(tb, lf, members...)
	} else {
		ns = NewSet(tb, lf)
	}
	return &localfleet.Fleet{Registry: lf.Registry, Namespace: ns, Members: lf.Members, Kubectl: lf.Kubectl}
}
