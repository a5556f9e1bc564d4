package health_test

import (
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// shared is the package's local fleet of one member, for the tests that change no member's
// servers; TestMain stops it.
var shared = fleettest.Shared{Options: localfleet.Options{Members: 1}}

// sharedSet is the shared fleet seen through a new cluster set of the test's own, holding copies
// of the named members' Clusters and of every credential Secret (no member when none is named):
// the helpers that take a fleet (fastOptions, ready, waitFor, setToken) work in that set. It
// must not be stopped: its servers are the shared fleet's.
func sharedSet(t *testing.T, members ...string) *localfleet.Fleet {
	t.Helper()
	integration(t)
	lf := shared.Fleet(t)
	ns := fleettest.NewSet(t, lf)
	if len(members) > 0 {
		ns = fleettest.CopySet(t, lf, members...)
	}
	return &localfleet.Fleet{Registry: lf.Registry, Namespace: ns, Members: lf.Members, Kubectl: lf.Kubectl}
}
