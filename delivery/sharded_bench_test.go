package delivery_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/replicaproc"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

var shardedMembers = flag.Int("sharded-members", 10000, "how many simulated members BenchmarkShardedDelivery delivers to")

// BenchmarkShardedDelivery: one Release of 5 ConfigMaps to 10,000 simulated members
// (-sharded-members), by the releases controller sharded over 3 replicas of one shard group,
// each a process of its own with its own Fleet and its share of the members (as in a Deployment
// of clusterregistry controllers --shard-group), named by one PlacementDecision of a real
// registry. Run it once (-benchtime 1x). Reported:
//   - s-to-ready: from the Release's creation until its status says every member Ready (target
//     60 s);
//   - slices and members/slice-max: the Release's status slices, and the most members one holds
//     (target: 100 slices of at most 100 members);
//   - KiB/delivery: the 3 replicas' heap over the members, each replica's Fleet (every Cluster)
//     included, beside BenchmarkDelivery's in one process; heap-MiB-max: the busiest replica's;
//   - CPU-s: the 3 replicas' CPU from their start until every member was Ready.
func BenchmarkShardedDelivery(b *testing.B) {
	if lf == nil {
		b.Skip("needs the registry: run without -short")
	}
	n := *shardedMembers
	sims := simmembers.Start(b, n, 0)
	ns := fleettest.NewSet(b, lf)
	clusters := sims.Clusters(ns)
	fleettest.CreateClusters(b, lf.Registry.Config, ns, clusters, nil)
	bulk := fleettest.Unthrottled(lf.Registry.Config)
	var chosen []decision.Chosen
	for _, c := range clusters {
		chosen = append(chosen, decision.Chosen{Cluster: types.NamespacedName{Namespace: ns, Name: c.Name}})
	}
	if _, err := decision.Write(context.Background(), cpversioned.NewForConfigOrDie(bulk), ns, "web", chosen, decision.WriteOptions{SchedulerName: "bench"}); err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		benchShardedDelivery(b, ns, fmt.Sprintf("app-%d", i), n)
	}
}

func benchShardedDelivery(b *testing.B, ns, name string, n int) {
	registry := versioned.NewForConfigOrDie(fleettest.Unthrottled(lf.Registry.Config)).ClusterregistryV1alpha1()
	procs := make([]*replicaproc.Proc, 3)
	for i := range procs {
		procs[i] = replicaproc.Start(b, deliveryReplicaEnv, deliveryReplicaSpec{Kubeconfig: lf.Registry.Kubeconfig, Namespace: ns, Identity: fmt.Sprintf("replica-%d", i)})
	}
	defer func() {
		for _, p := range procs {
			p.Stop()
		}
	}()
	// Every replica sees the group whole, and the three own every member between them.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		owned, whole := 0, true
		for _, p := range procs {
			var r deliveryReplicaResult
			p.Ask(b, "members", &r)
			owned, whole = owned+r.Members, whole && r.Live == len(procs)
		}
		if whole && owned == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the replicas own %d of %d members after 2 minutes", owned, n)
		}
	}

	var objs []runtime.RawExtension
	for i := range 5 {
		objs = append(objs, runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s-%d"},"data":{"k":"v"}}`, name, i)})
	}
	ctx := context.Background()
	start := time.Now()
	_, err := registry.Releases(ns).Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: objs}, Placement: v1alpha1.ReleasePlacement{Name: "web"}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for deadline := start.Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		rel, err := registry.Releases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if rel.Status.ObservedGeneration == rel.Generation && int(rel.Status.Ready) == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d members Ready after 5 minutes: %+v", rel.Status.Ready, n, rel.Status.Phases)
		}
	}
	elapsed := time.Since(start)

	sl, err := registry.ReleaseStatusSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{v1alpha1.ReleaseLabel: name}.String()})
	if err != nil {
		b.Fatal(err)
	}
	most := 0
	for _, s := range sl.Items {
		most = max(most, len(s.Members))
	}
	var heap, heapMax uint64
	var cpu time.Duration
	for _, p := range procs {
		var r deliveryReplicaResult
		p.Ask(b, "measure", &r)
		heap, heapMax, cpu = heap+r.Heap, max(heapMax, r.Heap), cpu+r.CPU
	}
	b.ReportMetric(elapsed.Seconds(), "s-to-ready")
	b.ReportMetric(float64(len(sl.Items)), "slices")
	b.ReportMetric(float64(most), "members/slice-max")
	b.ReportMetric(float64(heap)/float64(n)/1024, "KiB/delivery")
	b.ReportMetric(float64(heapMax)/(1<<20), "heap-MiB-max")
	b.ReportMetric(cpu.Seconds(), "CPU-s")
}

const deliveryReplicaEnv = "DELIVERY_BENCH_REPLICA"

// deliveryReplicaSpec is what a replica process of BenchmarkShardedDelivery runs.
type deliveryReplicaSpec struct {
	Kubeconfig, Namespace, Identity string
}

// deliveryReplicaResult is what a replica answers: the live replicas it sees and the members it
// owns ("members"), and its heap since it started and its CPU ("measure").
type deliveryReplicaResult struct {
	Live, Members int
	Heap          uint64
	CPU           time.Duration
}

// deliveryReplicaMain is a replica process's main (TestMain calls it first).
func deliveryReplicaMain() (code int, child bool) {
	return replicaproc.Main(deliveryReplicaEnv, runDeliveryReplica)
}

// runDeliveryReplica runs a sharded releases controller, as clusterregistry controllers
// --shard-group does, until its input closes.
func runDeliveryReplica(spec deliveryReplicaSpec, in io.Reader, out io.Writer) error {
	heap0, _ := simmembers.SettledHeapAndGoroutines()
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return err
	}
	cfg = fleettest.Unthrottled(cfg)
	resolver, err := simmembers.NewResolver()
	if err != nil {
		return err
	}
	registry, kube := versioned.NewForConfigOrDie(cfg), kubernetes.NewForConfigOrDie(cfg)
	fleet := multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: []string{spec.Namespace}})
	peers, err := shard.NewPeers(kube.CoordinationV1(), shard.PeerOptions{Namespace: spec.Namespace, Group: "releases", Identity: spec.Identity})
	if err != nil {
		return err
	}
	view := shard.NewView(fleet, peers)
	ctrl, err := delivery.NewController(view, registry, kube, cpversioned.NewForConfigOrDie(cfg), delivery.ControllerOptions{
		Namespace: spec.Namespace, MemberConcurrency: 128, Fresh: func() bool { return fleet.Status().Fresh() },
		Sharding: delivery.NewSharding(peers, fleet),
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if err := fleet.Start(ctx); err != nil {
		return err
	}
	defer fleet.Stop()
	for _, run := range []func(context.Context) error{peers.Run, view.Run, ctrl.Run} {
		wg.Go(func() { _ = run(ctx) })
	}
	return replicaproc.Serve(in, out, func(request string) (any, error) {
		switch request {
		case "members":
			return deliveryReplicaResult{Live: len(peers.Live()), Members: len(view.Members())}, nil
		case "measure":
			heap, _ := simmembers.SettledHeapAndGoroutines()
			return deliveryReplicaResult{Heap: heap - heap0, CPU: simmembers.ProcessCPU()}, nil
		}
		return nil, fmt.Errorf("unknown request %q", request)
	})
}
