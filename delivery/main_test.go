package delivery_test

import (
	"context"
	"os"
	"testing"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// lf is the package's local fleet: a registry with SIG Multicluster's PlacementDecision CRD, and
// two members that the tests' cluster sets share. The members run workloads (kube-controller-
// manager, kube-scheduler, KWOK's Nodes): a Deployment's health is what the Deployment controller
// reports of real ReplicaSets and Pods, never a status a test wrote.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// The benchmarks' simulated members run in a child process of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	// BenchmarkShardedDelivery's replicas too.
	if code, child := deliveryReplicaMain(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 2, Workloads: &localfleet.Workloads{}}, func(lf *localfleet.Fleet) error {
		return fleettest.InstallPlacementDecisionCRD(context.Background(), lf.Registry.Config)
	})
}
