package clusterprofile_test

import (
	"context"
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// lf is the package's local fleet: a registry, with the ClusterProfile CRD, and one member.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	fleetmain.Main(m, &lf, localfleet.Options{Members: 1}, func(lf *localfleet.Fleet) error {
		return fleettest.InstallClusterProfileCRD(context.Background(), lf.Registry.Config)
	})
}
