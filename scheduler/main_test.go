package scheduler_test

import (
	"context"
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// lf is the package's registry, with the PlacementDecision CRD and no members: the scheduler
// decides from Clusters and their status alone.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleetmain.Main(m, &lf, localfleet.Options{}, func(lf *localfleet.Fleet) error {
		return fleettest.InstallPlacementDecisionCRD(context.Background(), lf.Registry.Config)
	})
}
