package controllers_test

import (
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
)

// lf is the package's local fleet: a registry without SIG Multicluster's CRDs, and two members.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleetmain.Main(m, &lf, localfleet.Options{Members: 2}, nil)
}
