package capacity_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/benchproc"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// BenchmarkCapacity runs the capacity Controller over 1,000 simulated members (each 3 Nodes and
// 30 Pods bound to them, testkit/simmembers) registered in a real registry, beside the health
// Controller over the same members; each in a process of its own (benchproc), so that each
// heap is its own. Reported: first-write-s, until every member's figures are written once;
// heap-KiB/member once written and settled (the caches of Nodes and Pods, cut by the
// transforms, and the Fleet beneath them; health's: its probes' state); steady-writes/s over a
// minute after (target 0: nothing moves). simmembers' watches send no events, so Pod churn is
// not measured here; TestCapacityInStatus asserts what churn under the threshold writes
// (nothing) on a real member.
func BenchmarkCapacity(b *testing.B) {
	realservers.Required(b)
	const n = 1000
	b.Run("capacity", func(b *testing.B) {
		benchproc.Run(b, func(b *testing.B) { benchFleet(b, n, runCapacity) })
	})
	b.Run("health", func(b *testing.B) {
		benchproc.Run(b, func(b *testing.B) { benchFleet(b, n, runHealth) })
	})
}

// benchFleet registers n simulated members in set "sim" of the registry, runs a controller over
// them with run (its writes made with written, which counts them), and reports its figures.
func benchFleet(b *testing.B, n int, run func(b *testing.B, ctx context.Context, bulk, written *rest.Config)) {
	sims := simmembers.Start(b, n, 0)
	items := sims.Clusters("sim")
	fleettest.CreateClusters(b, lf.Registry.Config, "sim", items, nil)
	bulk := fleettest.Unthrottled(lf.Registry.Config)
	for b.Loop() {
		var writes atomic.Int64
		heap0, _ := simmembers.SettledHeapAndGoroutines()
		ctx, stop := context.WithCancel(context.Background())
		start := time.Now()
		done := make(chan struct{})
		go func() { defer close(done); run(b, ctx, bulk, fleettest.CountClusterWrites(bulk, &writes)) }()
		for writes.Load() < int64(n) {
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("%d of %d members written after 5 minutes", writes.Load(), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
		b.ReportMetric(time.Since(start).Seconds(), "first-write-s")
		time.Sleep(5 * time.Second) // stragglers
		heap1, _ := simmembers.SettledHeapAndGoroutines()
		b.ReportMetric(float64(int64(heap1)-int64(heap0))/1024/float64(n), "heap-KiB/member")
		const window = time.Minute
		w0 := writes.Load()
		time.Sleep(window)
		b.ReportMetric(float64(writes.Load()-w0)/window.Seconds(), "steady-writes/s")
		w0 = writes.Load()
		b.ReportMetric(float64(churn(b, sims, window/2))/(window/2).Seconds(), "churn-events/s")
		b.ReportMetric(float64(writes.Load()-w0)/(window/2).Seconds(), "churn-writes/s")
		stop()
		<-done
	}
}

// runCapacity runs the capacity Controller, on a Fleet of set "sim", until ctx ends.
func runCapacity(b *testing.B, ctx context.Context, bulk, written *rest.Config) {
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(bulk), simmembers.Resolver(b), multicluster.FleetOptions{Namespaces: []string{"sim"}})
	if err := fleet.Start(ctx); err != nil {
		b.Error(err)
		return
	}
	defer fleet.Stop()
	c, err := capacity.New(capacity.Options{Registry: versioned.NewForConfigOrDie(written), Members: fleet})
	if err != nil {
		b.Error(err)
		return
	}
	if err := c.Start(ctx); err != nil {
		b.Error(err)
	}
}

// runHealth runs the health Controller over set "sim" until ctx ends.
func runHealth(b *testing.B, ctx context.Context, bulk, written *rest.Config) {
	c, err := health.New(health.Options{Registry: versioned.NewForConfigOrDie(written), Kube: kubernetes.NewForConfigOrDie(bulk),
		Resolver: simmembers.Resolver(b), Namespaces: []string{"sim"}})
	if err != nil {
		b.Error(err)
		return
	}
	if err := c.Run(ctx); err != nil && ctx.Err() == nil {
		b.Error(err)
	}
}

// churn has every member make a Pod and delete the one it made before (simmembers.ChurnPath)
// every churnEvery, for d, as Deployments rolling across the fleet would; it returns how many
// Pod events the members sent.
func churn(b *testing.B, sims *simmembers.Members, d time.Duration) int64 {
	const churnEvery = 2 * time.Second
	client := sims.Client()
	var events int64
	tick := churnEvery / time.Duration(len(sims.Servers))
	for end, i := time.Now().Add(d), 0; time.Now().Before(end); i++ {
		resp, err := client.Get(sims.Servers[i%len(sims.Servers)] + simmembers.ChurnPath)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		events += 2 // a Pod made, the one before deleted
		time.Sleep(tick)
	}
	return events
}
