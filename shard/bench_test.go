package shard_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/replicaproc"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// BenchmarkShardedHealth: the health controller over 10,000 simulated members (20 ms latency, in
// other processes; kept connections, a probe every 10 s, a 60 s heartbeat), first as one replica
// doing everything, then as 3 replicas of one shard group, in the same run, beside controls. Each replica is a
// process of its own (this test binary, run again), as in a Deployment, so that its heap and CPU
// are its own and no variant's leftovers count in another's. Run it once (-benchtime 1x); it
// takes about 12 minutes. Reported, over a steady window (a minute for 3 replicas):
//   - members-probed-twice: members probed by two replicas (target 0); members-unprobed: by none;
//   - coordination-writes/s (the group's Lease renewals) beside health-writes/s (status writes),
//     and throttled: requests the registry answered 429 (target 0);
//   - heap-MiB-single and heap-MiB-per-replica (the busiest), and their ratio
//     heap-per-replica/single (target ≤ 0.45);
//   - probes/s/core of the 3 replicas together beside probes/s/core-single, and their ratio
//     (target ≥ 0.9);
//   - the same ratio for the shard group of views of a whole Fleet (shard.NewView), each replica
//     following every Cluster: probes/s/core-sharded-by-name/single; the shard group measured
//     above is of bucket views (shard.NewBucketView), each replica watching only its buckets;
//   - and for controls with no shard group: probes/s/core-parts-own-watch/single, 3 replicas that
//     each probe a fixed third of the members (by the index in their names), following only its
//     third's Clusters (a label the registry filters by), so what three processes on this machine
//     cost without any coordination; and probes/s/core-part-alone/single: one of those, alone,
//     so with a third of the load and none of the others' competition for the cores.
func BenchmarkShardedHealth(b *testing.B) {
	realservers.Required(b)
	const n = 10000
	sims := simmembers.Start(b, n, 20*time.Millisecond)
	const ns = "sharded-bench"
	clusters := sims.Clusters(ns)
	for i := range clusters {
		clusters[i].Labels = map[string]string{partLabel: strconv.Itoa(i % parts)}
		shard.SetBucket(&clusters[i]) // as clusterregistry join does
	}
	fleettest.CreateClusters(b, lf.Registry.Config, ns, clusters, nil)

	for range b.N {
		single := runReplicas(b, ns, oneReplica, n, 30*time.Second)
		sharded := runReplicas(b, ns, shardGroup, n, time.Minute)
		byName := runReplicas(b, ns, shardByName, n, time.Minute)
		ownWatch := runReplicas(b, ns, fixedPartsOwnWatch, n, time.Minute)
		alone := runReplicas(b, ns, partAlone, n, time.Minute)
		b.ReportMetric(float64(sharded.twice), "members-probed-twice")
		b.ReportMetric(float64(sharded.unprobed), "members-unprobed")
		b.ReportMetric(sharded.leaseWrites, "coordination-writes/s")
		b.ReportMetric(sharded.statusWrites, "health-writes/s")
		b.ReportMetric(float64(single.throttled+sharded.throttled), "throttled")
		b.ReportMetric(single.heapMiB, "heap-MiB-single")
		b.ReportMetric(sharded.heapMiB, "heap-MiB-per-replica")
		b.ReportMetric(sharded.heapMiB/single.heapMiB, "heap-per-replica/single")
		b.ReportMetric(single.probesPerCore, "probes/s/core-single")
		b.ReportMetric(sharded.probesPerCore, "probes/s/core")
		b.ReportMetric(sharded.probesPerCore/single.probesPerCore, "probes/s/core-sharded/single")
		b.ReportMetric(byName.probesPerCore/single.probesPerCore, "probes/s/core-sharded-by-name/single")
		b.ReportMetric(ownWatch.probesPerCore/single.probesPerCore, "probes/s/core-parts-own-watch/single")
		b.ReportMetric(alone.probesPerCore/single.probesPerCore, "probes/s/core-part-alone/single")
	}
}

// layout is how the replicas of a run divide the members.
type layout string

const (
	oneReplica layout = "one" // one replica probes every member
	// shardGroup: a shard group of bucket views (shard.NewBucketView), each replica watching
	// the buckets it owns.
	shardGroup layout = "sharded"
	// shardByName: a shard group of views of a whole Fleet (shard.NewView), each replica
	// following every Cluster and owning some by their names.
	shardByName layout = "sharded-by-name"
	// fixedPartsOwnWatch: parts replicas, each probing the members whose index is its own modulo
	// parts, with no shard group, each following only its part's Clusters (partLabel).
	fixedPartsOwnWatch layout = "parts-own-watch"
	// partAlone: one replica probing fixedPartsOwnWatch's first part, alone on the machine, as
	// fixedPartsOwnWatch's replicas each do beside two others.
	partAlone layout = "part-alone"
)

// parts is how many replicas the layouts other than oneReplica run.
const parts = 3

// partLabel is a member's part (its index modulo parts), for fixedPartsOwnWatch's watches.
const partLabel = "bench.clusterregistry.k8s.io/part"

// inPart reports whether the member named name (member-NNNNN, simmembers' names) is in part.
func inPart(name string, part int) bool {
	i, err := strconv.Atoi(strings.TrimPrefix(name, "member-"))
	return err == nil && i%parts == part
}

// measured is what some replicas measured together over a steady window.
type measured struct {
	twice, unprobed, throttled int
	leaseWrites, statusWrites  float64
	heapMiB, probesPerCore     float64 // heapMiB: the busiest replica's
}

// runReplicas runs processes of the health controller, dividing the members as layout says, until
// every member's status is written by them once, and 10 s more; then measures a window.
func runReplicas(b *testing.B, ns string, layout layout, n int, window time.Duration) measured {
	replicas, target := parts, n
	if layout == oneReplica {
		replicas = 1
	}
	if layout == partAlone {
		replicas, target = 1, (n+parts-1)/parts // part 0 holds the remainder
	}
	var extraEnv []string
	if procs := os.Getenv(gomaxprocsEnv); procs != "" {
		extraEnv = append(extraEnv, "GOMAXPROCS="+procs)
	}
	procs := make([]*replicaproc.Proc, replicas)
	for i := range procs {
		procs[i] = replicaproc.Start(b, replicaEnv, replicaSpec{Kubeconfig: lf.Registry.Kubeconfig, Namespace: ns, Layout: layout, Part: i, Identity: fmt.Sprintf("replica-%d", i)}, extraEnv...)
	}
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	// First pass: a new controller writes every status once.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		written := 0
		for _, p := range procs {
			var r replicaResult
			p.Ask(b, "writes", &r)
			written += r.StatusWrites
		}
		if written >= target {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d replicas: %d of %d statuses written after 5 minutes", replicas, written, n)
		}
	}
	time.Sleep(10 * time.Second)

	for _, p := range procs {
		p.Ask(b, "start", &struct{}{})
	}
	time.Sleep(window)
	var m measured
	var cpu time.Duration
	probes, by := 0, map[string]int{}
	for _, p := range procs {
		var r replicaResult
		p.Ask(b, "stop", &r)
		cpu += r.CPU
		m.leaseWrites += float64(r.LeaseWrites) / window.Seconds()
		m.statusWrites += float64(r.StatusWrites) / window.Seconds()
		m.throttled += r.Throttled
		m.heapMiB = max(m.heapMiB, float64(r.Heap)/(1<<20))
		for key, count := range r.Probed {
			by[key]++
			probes += count
		}
	}
	for _, replicas := range by {
		if replicas > 1 {
			m.twice++
		}
	}
	m.unprobed = target - len(by)
	m.probesPerCore = float64(probes) / cpu.Seconds()
	return m
}

// replicaSpec is what a replica process is told to run, in replicaEnv.
type replicaSpec struct {
	Kubeconfig, Namespace, Identity string
	Layout                          layout
	Part                            int // this replica's part, in the fixed layouts
}

// replicaResult is what a replica process measured over the window, as a JSON line.
type replicaResult struct {
	Probed                               map[string]int
	CPU                                  time.Duration
	Heap                                 uint64
	StatusWrites, LeaseWrites, Throttled int
}

const replicaEnv = "SHARD_BENCH_REPLICA"

// gomaxprocsEnv, when set, is the GOMAXPROCS of every replica process (a Deployment's replicas
// with a CPU limit get theirs from it).
const gomaxprocsEnv = "SHARD_BENCH_REPLICA_GOMAXPROCS"

// replicaMain is a replica process's main (TestMain calls it): it runs the health controller as
// its spec says, measures the window between "start" and "stop" requests, answers "stop" with the
// result and "writes" with the status writes it made so far, and exits when its input closes.
func replicaMain() (code int, child bool) { return replicaproc.Main(replicaEnv, runReplica) }

func runReplica(spec replicaSpec, in io.Reader, out io.Writer) error {
	heap0, _ := simmembers.SettledHeapAndGoroutines()
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return err
	}
	var traffic counts
	cfg = traffic.config(cfg)
	resolver, err := simmembers.NewResolver()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // before the wait

	members, err := replicaMembers(ctx, &wg, cfg, resolver, spec)
	if err != nil {
		return err
	}
	probed := newProbeLog()
	c, err := health.New(health.Options{
		Registry: versioned.NewForConfigOrDie(cfg), Kube: kubernetes.NewForConfigOrDie(cfg),
		Members: members, KeepConnections: true, Metrics: prometheus.NewRegistry(), Logger: logr.New(probed),
	})
	if err != nil {
		return err
	}
	wg.Go(func() { _ = c.Run(ctx) })

	var cpu0 time.Duration
	var status0, lease0, throttled0 int64
	stopProfile := func() {}
	return replicaproc.Serve(in, out, func(request string) (any, error) {
		switch request {
		case "writes": // since the replica started
			return replicaResult{StatusWrites: int(traffic.statusWrites.Load())}, nil
		case "start":
			stopProfile = profileWindow(spec)
			probed.reset()
			cpu0 = simmembers.ProcessCPU()
			status0, lease0, throttled0 = traffic.statusWrites.Load(), traffic.leaseWrites.Load(), traffic.throttled.Load()
			return struct{}{}, nil
		case "stop":
			stopProfile()
			r := replicaResult{
				Probed: probed.snapshot(), CPU: simmembers.ProcessCPU() - cpu0,
				StatusWrites: int(traffic.statusWrites.Load() - status0), LeaseWrites: int(traffic.leaseWrites.Load() - lease0),
				Throttled: int(traffic.throttled.Load() - throttled0),
			}
			heap1, _ := simmembers.SettledHeapAndGoroutines()
			r.Heap = heap1 - heap0
			return r, nil
		}
		return nil, fmt.Errorf("unknown request %q", request)
	})
}

// replicaMembers are the members a replica probes, as its layout divides them: a shard group's
// (whose goroutines, and Fleet's, wg waits for), a fixed part of the fleet's, or all of them.
func replicaMembers(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, resolver *access.Resolver, spec replicaSpec) (multicluster.MemberSource, error) {
	fleetOpts := multicluster.FleetOptions{Namespaces: []string{spec.Namespace}}
	registry := versioned.NewForConfigOrDie(cfg)
	var peers *shard.Peers
	if spec.Layout == shardGroup || spec.Layout == shardByName {
		var err error
		if peers, err = shard.NewPeers(kubernetes.NewForConfigOrDie(cfg).CoordinationV1(), shard.PeerOptions{
			Namespace: spec.Namespace, Group: "bench", Identity: spec.Identity}); err != nil {
			return nil, err
		}
		wg.Go(func() { _ = peers.Run(ctx) })
	}
	if spec.Layout == shardGroup { // watches what it owns, with Fleets of its own
		view, err := shard.NewBucketView(registry, resolver, fleetOpts, peers)
		if err != nil {
			return nil, err
		}
		wg.Go(func() { _ = view.Run(ctx) })
		return view, nil
	}
	if spec.Layout == fixedPartsOwnWatch {
		fleetOpts.Selector = labels.SelectorFromSet(labels.Set{partLabel: strconv.Itoa(spec.Part)})
	}
	fleet := multicluster.NewFleet(registry, resolver, fleetOpts)
	if err := fleet.Start(ctx); err != nil {
		return nil, err
	}
	context.AfterFunc(ctx, fleet.Stop)
	switch spec.Layout {
	case shardByName:
		view := shard.NewView(fleet, peers)
		wg.Go(func() { _ = view.Run(ctx) })
		return view, nil
	case partAlone:
		part := multicluster.NewSubset()
		part.Keep(func(key types.NamespacedName) bool { return inPart(key.Name, spec.Part) })
		context.AfterFunc(ctx, part.Follow(fleet))
		return part, nil
	}
	return fleet, nil // one replica, or a part the registry's watch already keeps
}

// profileEnv names a directory: when set, each replica writes a CPU profile of its window there
// (LAYOUT-IDENTITY.pprof), to find where the sharded replicas spend what one replica does not.
const profileEnv = "SHARD_BENCH_CPUPROFILE"

// profileWindow starts the CPU profile of a window when profileEnv asks for one; the function it
// returns stops it.
func profileWindow(spec replicaSpec) func() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s.pprof", spec.Layout, spec.Identity)))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "replica: no CPU profile:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}

// probeLog is a logr sink that counts the health controller's "probed" lines by member: who
// probed what, at the cost of a map update per probe (the same in every run it is compared with).
type probeLog struct {
	mu     sync.Mutex
	counts map[string]int
}

func newProbeLog() *probeLog { return &probeLog{counts: map[string]int{}} }

func (p *probeLog) reset() {
	p.mu.Lock()
	p.counts = map[string]int{}
	p.mu.Unlock()
}

// snapshot is a copy of the counts: the controller goes on probing while the result is encoded
// (the map itself, encoded as probes went on, lost members to the encoding, or crashed it on a
// concurrent map write).
func (p *probeLog) snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

func (p *probeLog) Init(logr.RuntimeInfo)  {}
func (p *probeLog) Enabled(level int) bool { return level <= 1 }
func (p *probeLog) Info(_ int, msg string, kv ...any) {
	if msg != "probed" {
		return
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "cluster" {
			p.mu.Lock()
			p.counts[kv[i+1].(string)]++
			p.mu.Unlock()
			return
		}
	}
}
func (p *probeLog) Error(error, string, ...any)    {}
func (p *probeLog) WithValues(...any) logr.LogSink { return p }
func (p *probeLog) WithName(string) logr.LogSink   { return p }

// counts are a replica's requests to the registry: status writes, Lease writes, and requests
// throttled (answered 429).
type counts struct {
	statusWrites, leaseWrites, throttled atomic.Int64
}

// config is cfg, unthrottled on the client (QPS -1, so that any throttling seen is the
// registry's), counting what goes through it.
func (c *counts) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			switch {
			case r.Method == http.MethodPatch && strings.Contains(r.URL.Path, "/clusters/"):
				c.statusWrites.Add(1)
			case r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/leases"):
				c.leaseWrites.Add(1)
			}
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == http.StatusTooManyRequests {
				c.throttled.Add(1)
			}
			return resp, err
		})
	}
	return cfg
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
