package clusterprofile_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/internal/fleettest"
	"github.com/cluster-registry/sdk/localfleet"
)

// lf is the package's local fleet: a registry, with the ClusterProfile CRD, and one member.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	logf.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	lf, err = localfleet.Start(context.Background(), localfleet.Options{Members: 1})
	if err == nil {
		err = fleettest.InstallClusterProfileCRD(context.Background(), lf.Registry.Config)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if lf != nil {
			_ = lf.Stop()
		}
		os.Exit(1)
	}
	code := m.Run()
	if err := lf.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}
