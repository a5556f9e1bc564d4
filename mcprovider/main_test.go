package mcprovider_test

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// lf is the package's local fleet: a registry and two members, shared by every test.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// The benchmarks' simulated members run in child processes of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 2}, nil)
}

// startFleet follows the local fleet's Clusters in namespace ns until the test ends. Its
// Resolver rereads credentials every 200ms, so that changes are seen quickly.
func startFleet(t *testing.T, ctx context.Context, ns string) *multicluster.Fleet {
	t.Helper()
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets:         access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
		ClientIP:        netip.MustParseAddr("127.0.0.1"),
		RevalidateAfter: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	t.Cleanup(fleet.Stop)
	return fleet
}

// newManager is a multicluster manager on the registry with the provider, serving nothing.
func newManager(t *testing.T, provider *mcprovider.Provider) mcmanager.Manager {
	t.Helper()
	mgr, err := mcmanager.New(lf.Registry.Config, provider, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)}, // -count=N
	})
	require.NoError(t, err)
	return mgr
}

// run starts the manager and stops it, waiting, when the test ends.
func run(t *testing.T, mgr mcmanager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}
