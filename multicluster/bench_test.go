package multicluster

import (
	"context"
	"fmt"
	"runtime"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/testkit/benchproc"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// simLatency is each simulated member's answer time, as a distant API server's might be.
const simLatency = 50 * time.Millisecond

// BenchmarkFanOut: one namespaced GET on every member, at 10, 100 and 1000 simulated members of
// 50ms latency, unlimited concurrency. Reported, besides time per fan-out:
//   - latency-ratio: a fan-out's wall time over one member's latency (target under 2 at 1000);
//   - client-CPU-µs/call and sim-CPU-µs/call: the client's and the simulated members' CPU per
//     member call. They share this machine's cores, so at large N their sum over the core count,
//     not the latency, sets the wall time;
//   - handshakes/member: TLS handshakes each member saw over all the fan-outs (target 1);
//   - warm-KiB/member and warm-goroutines/member: client-side heap and goroutines a member holds
//     once used (targets 128 KiB and 2);
//   - idle-KiB/member and idle-goroutines/member: the same for members never used (target 0
//     goroutines).
//
// peer-members=N is the hand-rolled peer, in the same run: one client-go clientset per member,
// built once, and an errgroup with no limit. Compare its latency-ratio with ours at the same N
// (target: ours at least as good at every N).
//
// paired/members=N runs ours and the peer's fan-outs in turn over the same simulated members, in
// one process, and reports client-CPU-ratio-to-peer: our client CPU over the whole run divided by
// the peer's. The machine's noise (the simulated members, other processes) falls on both alike,
// where two processes run minutes apart differed by a fifth or more in CPU per call.
//
// naive/members=N is the same fan-out done as tools often do it: sequentially, with a new
// rest.Config and clientset per call. Compare its latency-ratio with ours at the same N.
func BenchmarkFanOut(b *testing.B) {
	realservers.Required(b)
	// Each N of ours and the peer's in a process of its own (package benchproc): CPU and heap
	// measured in one process carry what the variant before left (idle connections, transports,
	// a grown heap), whichever ran first.
	for _, n := range []int{10, 100, 1000, 3000} {
		b.Run(fmt.Sprintf("members=%d", n), func(b *testing.B) { benchproc.Run(b, func(b *testing.B) { benchFanOut(b, n) }) })
		b.Run(fmt.Sprintf("peer-members=%d", n), func(b *testing.B) { benchproc.Run(b, func(b *testing.B) { benchPeer(b, n) }) })
		b.Run(fmt.Sprintf("paired/members=%d", n), func(b *testing.B) { benchproc.Run(b, func(b *testing.B) { benchPaired(b, n) }) })
	}
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("naive/members=%d", n), func(b *testing.B) { benchNaive(b, n) })
	}
}

func benchFanOut(b *testing.B, n int) {
	sim := simmembers.Start(b, n, simLatency)
	ctx := context.Background()

	heap0, g0 := simmembers.SettledHeapAndGoroutines()
	members := MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), FleetOptions{})
	heapIdle, gIdle := simmembers.SettledHeapAndGoroutines()
	if err := ForEach(ctx, members, getConfigMap).Err(); err != nil { // warm every member
		b.Fatal(err)
	}
	heapWarm, gWarm := simmembers.SettledHeapAndGoroutines()

	cpu0, simCPU0 := processCPU(), simCPU(b, members[0])
	b.ResetTimer()
	for b.Loop() {
		if err := ForEach(ctx, members, getConfigMap, NoRetry()).Err(); err != nil {
			b.Fatal(err)
		}
	}
	perFanOut := b.Elapsed() / time.Duration(b.N)
	b.StopTimer()
	// The simulated members share this machine's cores; the client's own CPU per call shows what
	// the fan-out costs apart from them.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N*n), "client-CPU-µs/call")
	b.ReportMetric(float64(simCPU(b, members[0])-simCPU0)/float64(time.Microsecond)/float64(b.N*n), "sim-CPU-µs/call")

	b.ReportMetric(float64(perFanOut)/float64(simLatency), "latency-ratio")
	b.ReportMetric(handshakesPerMember(b, members), "handshakes/member")
	b.ReportMetric(float64(heapWarm-heap0)/1024/float64(n), "warm-KiB/member")
	b.ReportMetric(float64(gWarm-g0)/float64(n), "warm-goroutines/member")
	b.ReportMetric(float64(heapIdle-heap0)/1024/float64(n), "idle-KiB/member")
	b.ReportMetric(float64(gIdle-g0)/float64(n), "idle-goroutines/member")
	runtime.KeepAlive(members)
}

// benchPeer is the hand-rolled peer: a clientset per member built once, outside the timing, and
// one goroutine per member per fan-out with errgroup.
func benchPeer(b *testing.B, n int) {
	sim := simmembers.Start(b, n, simLatency)
	fanOut := peerFanOut(b, sim)
	if err := fanOut(); err != nil { // warm every member, as the SDK's run is
		b.Fatal(err)
	}
	cpu0 := processCPU()
	b.ResetTimer()
	for b.Loop() {
		if err := fanOut(); err != nil {
			b.Fatal(err)
		}
	}
	perFanOut := b.Elapsed() / time.Duration(b.N)
	b.StopTimer()
	b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N*n), "client-CPU-µs/call")
	b.ReportMetric(float64(perFanOut)/float64(simLatency), "latency-ratio")
}

// peerFanOut is the hand-rolled peer's fan-out over sim's members: a clientset per member, built
// here, and one goroutine per member per fan-out with errgroup.
func peerFanOut(b *testing.B, sim *simmembers.Members) func() error {
	clusters := sim.Clusters("sim")
	ctx := context.Background()
	clients := make([]kubernetes.Interface, len(clusters))
	for i := range clusters {
		cfg, err := simmembers.Resolver(b).Config(ctx, &clusters[i])
		if err != nil {
			b.Fatal(err)
		}
		if clients[i], err = kubernetes.NewForConfig(cfg); err != nil {
			b.Fatal(err)
		}
	}
	return func() error {
		var g errgroup.Group
		for _, kube := range clients {
			g.Go(func() error {
				_, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "fleet-demo", metav1.GetOptions{})
				return err
			})
		}
		return g.Wait()
	}
}

// benchPaired runs ours and the peer's fan-outs in turn, each first on every other iteration (so
// that neither always pays the garbage the other left), and reports each side's client CPU per
// call and their ratio.
func benchPaired(b *testing.B, n int) {
	sim := simmembers.Start(b, n, simLatency)
	ctx := context.Background()
	members := MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), FleetOptions{})
	ours := func() error { return ForEach(ctx, members, getConfigMap, NoRetry()).Err() }
	peer := peerFanOut(b, sim)
	// Each side's goroutines carry a profiler label (side=sdk, side=peer), so that a CPU profile
	// of this run (-cpuprofile, with -tagfocus) shows each side's own samples. The warm-up runs
	// under the label too, and so the connections' HTTP/2 read loops, started by the call that
	// dials, are labelled side=sdk: the peer's clientsets are built from the same resolved
	// Configs, and client-go's process-wide transport cache gives both sides the same
	// connections, so the read loops serve whichever side is running (in a profile, count them
	// apart from both sides).
	labelled := func(side string, fanOut func() error) {
		pprof.Do(ctx, pprof.Labels("side", side), func(context.Context) {
			if err := fanOut(); err != nil {
				b.Fatal(err)
			}
		})
	}
	labelled("sdk", ours)
	labelled("peer", peer)

	// The two sides never run at once, so what the process spends and allocates during a side's
	// turn is that side's (but for a collection the other side's garbage set off; hence each
	// side goes first on every other iteration).
	type spent struct {
		cpu           time.Duration
		allocs, bytes uint64
	}
	var ourSpent, peerSpent spent
	var m0, m1 runtime.MemStats
	timed := func(side string, fanOut func() error, into *spent) {
		runtime.ReadMemStats(&m0)
		cpu0 := processCPU()
		labelled(side, fanOut)
		into.cpu += processCPU() - cpu0
		runtime.ReadMemStats(&m1)
		into.allocs += m1.Mallocs - m0.Mallocs
		into.bytes += m1.TotalAlloc - m0.TotalAlloc
	}
	odd := false
	for b.Loop() {
		if odd {
			timed("peer", peer, &peerSpent)
			timed("sdk", ours, &ourSpent)
		} else {
			timed("sdk", ours, &ourSpent)
			timed("peer", peer, &peerSpent)
		}
		odd = !odd
	}
	calls := float64(b.N * n)
	b.ReportMetric(float64(ourSpent.cpu)/float64(time.Microsecond)/calls, "client-CPU-µs/call")
	b.ReportMetric(float64(peerSpent.cpu)/float64(time.Microsecond)/calls, "peer-client-CPU-µs/call")
	b.ReportMetric(float64(ourSpent.cpu)/float64(peerSpent.cpu), "client-CPU-ratio-to-peer")
	b.ReportMetric(float64(ourSpent.allocs)/calls, "allocs/call")
	b.ReportMetric(float64(peerSpent.allocs)/calls, "peer-allocs/call")
	b.ReportMetric(float64(ourSpent.bytes)/calls, "B/call")
	b.ReportMetric(float64(peerSpent.bytes)/calls, "peer-B/call")
	runtime.KeepAlive(members)
}

// benchNaive builds a new rest.Config and clientset for every call, one member after another.
func benchNaive(b *testing.B, n int) {
	sim := simmembers.Start(b, n, simLatency)
	clusters := sim.Clusters("sim")
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		for i := range clusters {
			cfg, err := simmembers.Resolver(b).Config(ctx, &clusters[i]) // no cache
			if err != nil {
				b.Fatal(err)
			}
			kube, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "fleet-demo", metav1.GetOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed()/time.Duration(b.N))/float64(simLatency), "latency-ratio")
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMemberKubernetesCached: a used member's clientset, asked for again, as every fan-out
// callback does. It must not be rebuilt, nor allocate.
func BenchmarkMemberKubernetesCached(b *testing.B) {
	sim := simmembers.Start(b, 1, 0)
	m := MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), FleetOptions{})[0]
	first, err := m.Kubernetes(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		k, _ := m.Kubernetes(context.Background())
		if k != first {
			b.Fatal("rebuilt")
		}
	}
}
