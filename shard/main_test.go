package shard_test

import (
	"os"
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// lf is the package's registry, with no members: the replicas' Leases and the Clusters they
// divide live there, and no member is reached.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// BenchmarkShardedHealth's simulated members and replicas run in child processes of this
	// binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	if code, child := replicaMain(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{}, nil)
}
