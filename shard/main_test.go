package shard_test

import (
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// lf is the package's registry, with no members: the replicas' Leases and the Clusters they
// divide live there, and no member is reached.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleettest.Main(m, &lf, localfleet.Options{}, nil)
}
