package delivery_test

import (
	"context"
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// lf is the package's local fleet: a registry with SIG Multicluster's PlacementDecision CRD, and
// two members that the tests' cluster sets share.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleettest.Main(m, &lf, localfleet.Options{Members: 2}, func(lf *localfleet.Fleet) error {
		return fleettest.InstallPlacementDecisionCRD(context.Background(), lf.Registry.Config)
	})
}
