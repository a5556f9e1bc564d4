package clusterregistry_test

import (
	"context"
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
