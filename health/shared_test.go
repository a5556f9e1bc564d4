package health_test

import (
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// shared is the package's local fleet of one member, for the tests that change no member's
// servers; TestMain stops it.
var shared = fleettest.Shared{Options: localfleet.Options{Members: 1}}

// sharedSet is the shared fleet seen through a new cluster set of the test's own, holding copies
// of the named members' Clusters (fleettest.Shared.Set): the helpers that take a fleet
// (fastOptions, ready, waitFor, setToken) work in that set. It must not be stopped.
func sharedSet(t *testing.T, members ...string) *localfleet.Fleet {
	t.Helper()
	realservers.Required(t)
	return shared.Set(t, members...)
}
