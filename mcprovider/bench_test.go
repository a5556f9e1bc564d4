package mcprovider_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"
	clustersprovider "sigs.k8s.io/multicluster-runtime/providers/clusters"

	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/benchproc"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

var benchMembers = flag.Int("members", 1000, "simulated members in BenchmarkEngage")

// BenchmarkEngage: a multicluster manager with one controller of ConfigMaps engages 1,000
// simulated members (100 ConfigMaps each), by this package's Provider over a Fleet's members, and
// by multicluster-runtime's own providers/clusters fed the clusters its kubeconfig provider would
// build (cluster.New on each member's rest.Config; the kubeconfig provider itself reads Secrets
// from a real API server, which simulated members do not serve). Reported: the time from the
// manager's start until every member's cache of ConfigMaps has synced, and the heap and goroutines
// per engaged cluster once they have. Each variant runs in a process of its own (package
// benchproc), with its own simulated members, so that no variant's leftovers count in another's.
func BenchmarkEngage(b *testing.B) {
	variant := func(name string, fn func(b *testing.B, sim *simmembers.Members)) {
		b.Run(name, func(b *testing.B) {
			benchproc.Run(b, func(b *testing.B) { fn(b, simmembers.Start(b, *benchMembers, 0)) })
		})
	}
	variant("sdk", func(b *testing.B, sim *simmembers.Members) {
		for b.Loop() {
			members := multicluster.MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), multicluster.FleetOptions{})
			benchEngage(b, members, func() (mcmulticluster.Provider, getCluster) {
				provider := mcprovider.New(fleettest.Fixed(members), mcprovider.Options{})
				return provider, provider.Get
			})
		}
	})
	variant("sdk-warm", func(b *testing.B, sim *simmembers.Members) {
		for b.Loop() {
			members := multicluster.MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), multicluster.FleetOptions{})
			benchEngage(b, members, func() (mcmulticluster.Provider, getCluster) {
				provider := mcprovider.New(fleettest.Fixed(members), mcprovider.Options{WarmKinds: []client.Object{&corev1.ConfigMap{}}})
				return provider, provider.Get
			})
		}
	})
	variant("peer-mcr-clusters-provider", func(b *testing.B, sim *simmembers.Members) {
		for b.Loop() {
			members := multicluster.MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), multicluster.FleetOptions{})
			benchEngage(b, members, func() (mcmulticluster.Provider, getCluster) {
				provider := clustersprovider.New()
				for _, m := range members {
					cfg, err := m.Config(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					cl, err := cluster.New(rest.CopyConfig(cfg))
					if err != nil {
						b.Fatal(err)
					}
					if err := provider.Add(context.Background(), mcprovider.ClusterName(m.Name()), cl); err != nil {
						b.Fatal(err)
					}
				}
				return provider, provider.Get
			})
		}
	})
}

// getCluster is a provider's Get.
type getCluster func(context.Context, mcmulticluster.ClusterName) (cluster.Cluster, error)

// benchEngage measures from before newProvider builds the provider (and, for the peer, the
// clusters it is given) until every member's cache has synced.
func benchEngage(b *testing.B, members []*multicluster.Member, newProvider func() (mcmulticluster.Provider, getCluster)) {
	heap0, g0 := simmembers.SettledHeapAndGoroutines()
	began := time.Now()
	provider, get := newProvider()
	local, err := members[0].Config(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := mcmanager.New(rest.CopyConfig(local), provider, manager.Options{
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		b.Fatal(err)
	}
	// The controller reconciles nothing: what is measured is engaging and caching.
	none := mcbuilder.WithPredicates(predicate.NewPredicateFuncs(func(client.Object) bool { return false }))
	if err := mcbuilder.ControllerManagedBy(mgr).Named(fmt.Sprintf("bench-%p", provider)).For(&corev1.ConfigMap{}, none).
		Complete(mcreconcile.Func(func(context.Context, mcreconcile.Request) (ctrl.Result, error) { return ctrl.Result{}, nil })); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = mgr.Start(ctx) })
	for _, m := range members {
		name := mcprovider.ClusterName(m.Name())
		for {
			if cl, err := get(ctx, name); err == nil {
				if inf, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{}); err == nil && inf.HasSynced() {
					break
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	engaged := time.Since(began)
	heap1, g1 := simmembers.SettledHeapAndGoroutines()
	if path := os.Getenv("MCPROVIDER_HEAP_PROFILE"); path != "" {
		f, _ := os.Create(path + "." + b.Name()[strings.LastIndex(b.Name(), "/")+1:])
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
	cancel()
	wg.Wait()
	n := float64(len(members))
	b.ReportMetric(engaged.Seconds(), "engage-all-s")
	b.ReportMetric(float64(heap1-heap0)/1024/n, "KiB/cluster")
	b.ReportMetric(float64(g1-g0)/n, "goroutines/cluster")
	runtime.KeepAlive(members)
}
