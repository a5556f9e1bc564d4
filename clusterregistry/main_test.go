package clusterregistry_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/localfleet"
)

// lf is the registry every test in this package shares, a real kube-apiserver with the Cluster CRD
// installed, and no members; each test works in its own namespace.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// -short runs the unit tests of pure logic, without the API-server binaries; every test here
	// runs against real servers.
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipped under -short: these tests need kube-apiserver and etcd")
		os.Exit(0)
	}
	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	var err error
	if lf, err = localfleet.Start(context.Background(), localfleet.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := lf.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test registry:", err)
	}
	os.Exit(code)
}
