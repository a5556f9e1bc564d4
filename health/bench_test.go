package health_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// BenchmarkHealth: the controller over 10,000 simulated members (20ms latency, in other
// processes) registered in a real registry, probing each once per 10 s with the default
// thresholds, once with a connection per probe (the default) and once with KeepConnections. Run
// it once (-benchtime 1x); it takes a few minutes per mode. Reported:
//   - first-pass-s: time until every Cluster's status is written once (10,000 writes);
//   - CPU-µs/probe-all-in and probes/s/core: the controller's own CPU at steady state (probes
//     and the heartbeats' status writes) per probe, and the probes one core sustains at that
//     cost;
//   - CPU-µs/write: the client's CPU per status write, measured apart (1,000 writes of the
//     status the controller writes, with the same client, before it starts), and CPU-µs/probe,
//     what is left per probe once the steady state's writes are taken out at that cost, so that
//     a reader sees where the time goes;
//   - heap-KiB/member and goroutines/member: what the controller holds per member, warm;
//   - probe-ms and write-ms: the mean time of a probe and of a status write at steady state, each
//     of which holds one of the controller's workers;
//   - steady-writes/s: registry writes at steady state (heartbeats only; target at most one per
//     Cluster per Heartbeat, 60 s: 167/s here), over a window of one Heartbeat, so that each
//     Cluster's heartbeat is counted once whenever the first pass wrote it (over a 30 s window,
//     the figure depended on where the heartbeats that follow the first pass fell in it: 256/s
//     in one mode and 18/s in the other, in the same run, for the same writes);
//   - outage-writes/s: writes over the 40 s after 10% of the members fail at once (mostly the
//     heartbeats of the others), and outage-s: the time until a Ready False (or Unknown, not
//     probed) is written for every one of them (at least FailureThreshold probes, 20-30 s, before
//     the first is due), at most 3 minutes; outage-told is the share of them written by then.
func BenchmarkHealth(b *testing.B) {
	realservers.Required(b)
	const n = 10000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sims := simmembers.Start(b, n, 20*time.Millisecond)
	lf, err := localfleet.Start(ctx, localfleet.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer lf.Stop()
	items := sims.Clusters("sim")
	fleettest.CreateClusters(b, lf.Registry.Config, "sim", items, nil)
	bulk := fleettest.Unthrottled(lf.Registry.Config)

	resolver, err := access.NewResolver(access.ResolverOptions{Providers: map[string]access.Provider{
		simmembers.ProviderType: access.ProviderFunc(func(context.Context, *access.Request) (*access.Credentials, error) {
			return &access.Credentials{BearerToken: simmembers.Token}, nil
		}),
	}})
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		keep bool
	}{{"connection-per-probe", false}, {"keep-connections", true}} {
		b.Run(mode.name, func(b *testing.B) {
			benchmarkHealth(b, ctx, bulk, resolver, items, mode.keep)
		})
	}
}

// benchmarkHealth runs one controller over the registered members until the outage's writes are
// counted. Each run starts from the same registry; its first pass writes every status again,
// since a new controller writes what it has seen once.
func benchmarkHealth(b *testing.B, ctx context.Context, bulk *rest.Config, resolver *access.Resolver, items []v1alpha1.Cluster, keep bool) {
	n := len(items)
	var writes, writeNanos, notReady atomic.Int64
	reg := prometheus.NewRegistry()
	c, err := health.New(health.Options{
		Registry:        versioned.NewForConfigOrDie(timedWrites(fleettest.CountClusterWrites(bulk, &writes), &writeNanos, &notReady)),
		Kube:            kubernetes.NewForConfigOrDie(bulk),
		Resolver:        resolver,
		Namespaces:      []string{"sim"},
		Metrics:         reg,
		KeepConnections: keep,
	})
	if err != nil {
		b.Fatal(err)
	}
	perWrite := cpuPerWrite(b, ctx, bulk, items[:1000])
	heap0, g0 := settled()
	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	defer func() { stop(); <-done }()

	// First pass: every Cluster written once.
	for writes.Load() < int64(n) {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("only %d of %d Clusters written after 5 minutes", writes.Load(), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(time.Since(start).Seconds(), "first-pass-s")
	time.Sleep(10 * time.Second) // let the first pass's stragglers finish

	// Steady state, over one Heartbeat (health.Options' default): every Cluster's heartbeat falls
	// in it once, wherever the first pass put it.
	const window = time.Minute
	probes0, cpu0, writes0 := probes(b, reg), simmembers.ProcessCPU(), writes.Load()
	probeSeconds0, writeNanos0 := probeSeconds(b, reg), writeNanos.Load()
	time.Sleep(window)
	probed, cpu, wrote := probes(b, reg)-probes0, simmembers.ProcessCPU()-cpu0, writes.Load()-writes0
	b.ReportMetric((probeSeconds(b, reg)-probeSeconds0)*1000/probed, "probe-ms")
	b.ReportMetric(float64(writeNanos.Load()-writeNanos0)/1e6/float64(wrote), "write-ms")
	heap1, g1 := settled()
	b.ReportMetric(float64(cpu.Microseconds())/probed, "CPU-µs/probe-all-in")
	b.ReportMetric(probed/cpu.Seconds(), "probes/s/core")
	b.ReportMetric(float64(perWrite.Microseconds()), "CPU-µs/write")
	probeOnly := cpu - time.Duration(wrote)*perWrite
	b.ReportMetric(float64(probeOnly.Microseconds())/probed, "CPU-µs/probe")
	b.ReportMetric(probed/window.Seconds(), "probes/s")
	// Signed: the second mode's baseline holds what the first mode's run left behind (the shared
	// Resolver's resolutions, idle connections), and an unsigned difference below zero printed as
	// 1.8e12 KiB.
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/1024/float64(n), "heap-KiB/member")
	b.ReportMetric(float64(g1-g0)/float64(n), "goroutines/member")
	b.ReportMetric(float64(wrote)/window.Seconds(), "steady-writes/s")

	benchOutage(b, ctx, resolver, items, &writes, &notReady)
	runtime.KeepAlive(c)
}

// benchOutage fails a tenth of the members at once, and reports how long until the controller
// has written each NotReady (each when its FailureThreshold is reached), and its writes a second
// meanwhile; the members are made well again afterwards, for the next run.
func benchOutage(b *testing.B, ctx context.Context, resolver *access.Resolver, items []v1alpha1.Cluster, writes, notReady *atomic.Int64) {
	n := len(items)
	failing := multicluster.MembersOf(resolver, items[:n/10], multicluster.FleetOptions{})
	simPath := func(path string) error {
		return multicluster.ForEach(ctx, failing, func(ctx context.Context, m *multicluster.Member) error {
			kube, err := m.Kubernetes(ctx)
			if err != nil {
				return err
			}
			return kube.CoreV1().RESTClient().Get().AbsPath(path).Do(ctx).Error()
		}, multicluster.Concurrency(64)).Err()
	}
	if err := simPath("/debug/fail"); err != nil {
		b.Fatal(err)
	}
	writes0, notReady0, failed := writes.Load(), notReady.Load(), time.Now()
	const outage = 40 * time.Second
	for notReady.Load()-notReady0 < int64(len(failing)) && time.Since(failed) < 3*time.Minute {
		time.Sleep(100 * time.Millisecond)
	}
	b.ReportMetric(time.Since(failed).Seconds(), "outage-s")
	b.ReportMetric(min(1, float64(notReady.Load()-notReady0)/float64(len(failing))), "outage-told")
	time.Sleep(time.Until(failed.Add(outage)))
	b.ReportMetric(float64(writes.Load()-writes0)/time.Since(failed).Seconds(), "outage-writes/s")
	if err := simPath("/debug/recover"); err != nil {
		b.Fatal(err)
	}
}

// cpuPerWrite is this process's CPU per status write as the controller's writer makes it (a
// server-side apply of the Ready condition and lastProbeTime, as a heartbeat writes), over items.
func cpuPerWrite(b *testing.B, ctx context.Context, bulk *rest.Config, items []v1alpha1.Cluster) time.Duration {
	opts := health.Options{Registry: versioned.NewForConfigOrDie(bulk), FieldManager: "health-bench"}
	now := metav1.Now()
	if err := health.ApplyStatus(ctx, opts, items[0].Namespace, items[0].Name, now); err != nil { // the connection, warm
		b.Fatal(err)
	}
	runtime.GC()
	cpu0 := simmembers.ProcessCPU()
	for _, c := range items {
		if err := health.ApplyStatus(ctx, opts, c.Namespace, c.Name, now); err != nil {
			b.Fatal(err)
		}
	}
	return (simmembers.ProcessCPU() - cpu0) / time.Duration(len(items))
}

// timedWrites adds the time of each status write to nanos, and counts in notReady the writes of
// Ready False or Unknown the registry took.
func timedWrites(cfg *rest.Config, nanos, notReady *atomic.Int64) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	inner := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if inner != nil {
			rt = inner(rt)
		}
		return fleettest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodPatch {
				return rt.RoundTrip(r)
			}
			var body []byte
			if r.Body != nil {
				var err error
				if body, err = io.ReadAll(r.Body); err != nil {
					return nil, err
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			start := time.Now()
			resp, err := rt.RoundTrip(r)
			nanos.Add(int64(time.Since(start)))
			if err == nil && resp.StatusCode < 300 && (bytes.Contains(body, []byte(`"status":"False"`)) || bytes.Contains(body, []byte(`"status":"Unknown"`))) {
				notReady.Add(1)
			}
			return resp, err
		})
	}
	return cfg
}

// probeSeconds is the time the controller's probes have taken, from its histogram.
func probeSeconds(b *testing.B, reg *prometheus.Registry) float64 {
	return probeHistogram(b, reg, func(h *dto.Histogram) float64 { return h.GetSampleSum() })
}

// probes is how many probes the controller has made, from its histogram.
func probes(b *testing.B, reg *prometheus.Registry) float64 {
	return probeHistogram(b, reg, func(h *dto.Histogram) float64 { return float64(h.GetSampleCount()) })
}

// probeHistogram sums what of the probe duration histogram of every reason.
func probeHistogram(b *testing.B, reg *prometheus.Registry, what func(*dto.Histogram) float64) float64 {
	families, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, f := range families {
		if f.GetName() != "clusterregistry_health_probe_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			total += what(m.GetHistogram())
		}
	}
	return total
}

// settled reads the live heap and goroutine count after garbage collection.
func settled() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}
