package fleetmain

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// Main runs a package's tests beside a local fleet of opts, which setUp (when not nil) prepares
// and *lf holds meanwhile, and exits. Under -short no fleet starts: the tests that need one skip
// themselves; nor in a fuzz worker. The logs of controller-runtime (envtest, managers, clusters)
// and klog (informers that retry a stopped member's watch) are discarded.
func Main(m *testing.M, lf **localfleet.Fleet, opts localfleet.Options, setUp func(*localfleet.Fleet) error) {
	flag.Parse()
	logf.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())
	// A fuzz worker runs only the fuzz target, which needs no servers, and there is one per core.
	if f := flag.Lookup("test.fuzzworker"); testing.Short() || f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	fleet, err := localfleet.Start(context.Background(), opts)
	*lf = fleet // setUp may read it
	if err == nil && setUp != nil {
		err = setUp(fleet)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if fleet != nil {
			_ = fleet.Stop()
		}
		os.Exit(1)
	}
	code := m.Run()
	if err := fleet.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// IgnoreIdleConnections leaves out of goleak's checks the idle HTTP/2 and HTTP/1 connections to
// the servers: client-go shares transports between clients of one config, so they outlive the
// test that opened them.
var IgnoreIdleConnections = []goleak.Option{
	goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
}

// IgnoreFleetProcesses leaves out of goleak's checks the goroutine that waits on each of the
// local fleet's server processes: one a test restarts (localfleet's StartAPIServer) is waited on
// from then on, by the fleet, not by the test.
var IgnoreFleetProcesses = goleak.IgnoreAnyFunction("sigs.k8s.io/controller-runtime/pkg/internal/testing/process.(*State).Start.func1")

// Integration marks a test that needs the package's local fleet: skipped under -short
// (realservers.Required), and failed if it leaves a goroutine behind once it ends, idle
// connections aside.
func Integration(t *testing.T) {
	t.Helper()
	realservers.Required(t)
	t.Cleanup(func() {
		goleak.VerifyNone(t, append(IgnoreIdleConnections, IgnoreFleetProcesses, goleak.IgnoreCurrent())...)
	})
}
