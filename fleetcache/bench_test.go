package fleetcache

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimepkg "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crcluster "sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/benchproc"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// benchMembers is how many simulated members the cache benchmarks watch, each serving
// simmembers.ObjectsPerMember ConfigMaps.
var benchMembers = flag.Int("members", 1000, "simulated members in BenchmarkCaches")

// benchWrites is how many writes each run measures the event latency of.
const benchWrites = 500

// BenchmarkCaches: a cache of ConfigMaps on each of 1,000 simulated members with 100 each, by the
// SDK and by the hand-rolled peer (a client-go informer factory per member on a clientset of the
// member's resolved config, as a tool writes it without the SDK). Reported per run: time to sync
// every member, live heap and goroutines per member once synced, and the latency from a member's
// write to the handler (p50, p99). sdk-idle is a Cache of the members with no kind asked for;
// sdk-transform drops what a tool does not read (each ConfigMap's data) before caching;
// sdk-metadata caches only the ConfigMaps' metadata, beside peer-metadata (a metadata informer
// factory per member).
//
// Each variant runs in a process of its own (package benchproc), with its own simulated members,
// so that its heap and goroutines are its own: nothing another variant left (client-go's
// transport cache, idle connections) counts for or against it, whatever the order.
// sdk-connections is the floor under every mode: each member's connection open (TLS and HTTP/2,
// after one request) and nothing cached.
func BenchmarkCaches(b *testing.B) {
	variant := func(name string, fn func(b *testing.B, sim *simmembers.Members, writer *http.Client)) {
		b.Run(name, func(b *testing.B) {
			benchproc.Run(b, func(b *testing.B) {
				sim := simmembers.Start(b, *benchMembers, 0)
				fn(b, sim, simWriter(b, sim))
			})
		})
	}
	variant("sdk-idle", benchIdle)
	variant("sdk-connections", benchConnections)
	variant("sdk", func(b *testing.B, sim *simmembers.Members, writer *http.Client) {
		for b.Loop() {
			benchCaches(b, sim, writer, startSDK)
		}
	})
	// What a tool that reads only some fields keeps: the Data of each ConfigMap is dropped.
	variant("sdk-transform", func(b *testing.B, sim *simmembers.Members, writer *http.Client) {
		for b.Loop() {
			benchCaches(b, sim, writer, func(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap)) func() {
				return startSDKWith(b, sim, onEvent, KindOptions{Transform: func(obj any) (any, error) {
					if cm, ok := obj.(*corev1.ConfigMap); ok {
						cm.Data = nil
					}
					return obj, nil
				}})
			})
		}
	})
	// What a tool that only counts or finds objects keeps: their metadata, by the Metadata kind.
	variant("sdk-metadata", func(b *testing.B, sim *simmembers.Members, writer *http.Client) {
		for b.Loop() {
			benchCaches(b, sim, writer, startSDKMetadata)
		}
	})
	variant("peer-metadata", func(b *testing.B, sim *simmembers.Members, writer *http.Client) {
		for b.Loop() {
			benchCaches(b, sim, writer, startMetadataPeer)
		}
	})
	variant("peer-controller-runtime", func(b *testing.B, sim *simmembers.Members, writer *http.Client) {
		for b.Loop() {
			benchCaches(b, sim, writer, startControllerRuntimePeer)
		}
	})
	variant("peer", func(b *testing.B, sim *simmembers.Members, writer *http.Client) {
		for b.Loop() {
			benchCaches(b, sim, writer, startPeer)
		}
	})
}

// benchIdle measures what a Cache of every member costs, started and idle: heap and goroutines a
// member.
func benchIdle(b *testing.B, sim *simmembers.Members, _ *http.Client) {
	for b.Loop() {
		heap0, g0 := simmembers.SettledHeapAndGoroutines()
		members := multicluster.MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), multicluster.FleetOptions{})
		c := New(fleettest.Fixed(members))
		if err := c.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		heap1, g1 := simmembers.SettledHeapAndGoroutines()
		b.ReportMetric(float64(heap1-heap0)/1024/float64(*benchMembers), "KiB/member")
		b.ReportMetric(float64(g1-g0)/float64(*benchMembers), "goroutines/member")
		c.Stop()
		runtime.KeepAlive(members)
	}
}

// benchConnections measures what a member's kept connection costs, without a cache: heap and
// goroutines a member, after one request each.
func benchConnections(b *testing.B, sim *simmembers.Members, _ *http.Client) {
	for b.Loop() {
		heap0, g0 := simmembers.SettledHeapAndGoroutines()
		members := multicluster.MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), multicluster.FleetOptions{})
		// One request each: the member's shared transport dials, and keeps, its connection.
		if err := multicluster.ForEach(context.Background(), members, func(ctx context.Context, m *multicluster.Member) error {
			kube, err := m.Kubernetes(ctx)
			if err != nil {
				return err
			}
			_, err = kube.CoreV1().ConfigMaps("default").Get(ctx, "cm-000", metav1.GetOptions{})
			return err
		}, multicluster.Concurrency(64)).Err(); err != nil {
			b.Fatal(err)
		}
		heap1, g1 := simmembers.SettledHeapAndGoroutines()
		b.ReportMetric(float64(heap1-heap0)/1024/float64(*benchMembers), "KiB/member")
		b.ReportMetric(float64(g1-g0)/float64(*benchMembers), "goroutines/member")
		runtime.KeepAlive(members)
	}
}

// startCaches starts caches of ConfigMaps on every member, calling onEvent for each event, and
// returns when every member has synced, with a function that stops them.
type startCaches func(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap)) (stop func())

func benchCaches(b *testing.B, sim *simmembers.Members, writer *http.Client, start startCaches) {
	heap0, g0 := simmembers.SettledHeapAndGoroutines()
	var latencies []time.Duration
	var mu sync.Mutex
	var measuring atomic.Bool
	onEvent := func(cm *corev1.ConfigMap) {
		if !measuring.Load() {
			return
		}
		sent, err := strconv.ParseInt(cm.Annotations[simmembers.SentAnnotation], 10, 64)
		if err != nil {
			return
		}
		d := time.Since(time.Unix(0, sent))
		mu.Lock()
		latencies = append(latencies, d)
		mu.Unlock()
	}
	began := time.Now()
	stop := start(b, sim, onEvent)
	synced := time.Since(began)
	heap1, g1 := simmembers.SettledHeapAndGoroutines()
	if path := os.Getenv("FLEETCACHE_HEAP_PROFILE"); path != "" {
		f, _ := os.Create(path + "." + b.Name()[strings.LastIndex(b.Name(), "/")+1:])
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}

	// Writes to random members, a few milliseconds apart, as a fleet's changes trickle in.
	measuring.Store(true)
	for range benchWrites {
		server := sim.Servers[rand.IntN(len(sim.Servers))]
		resp, err := writer.Get(server + "/debug/write?t=" + strconv.FormatInt(time.Now().UnixNano(), 10))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(2 * time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(latencies)
		mu.Unlock()
		if n >= benchWrites || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()

	mu.Lock()
	defer mu.Unlock()
	if len(latencies) < benchWrites {
		b.Fatalf("%d of %d writes reached the handler", len(latencies), benchWrites)
	}
	slices.Sort(latencies)
	b.ReportMetric(synced.Seconds(), "sync-s")
	b.ReportMetric(float64(heap1-heap0)/1024/float64(*benchMembers), "KiB/member")
	b.ReportMetric(float64(g1-g0)/float64(*benchMembers), "goroutines/member")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
}

func startSDK(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap)) func() {
	return startSDKWith(b, sim, onEvent, KindOptions{})
}

func startSDKWith(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap), opts KindOptions) func() {
	return startSDKKind(b, sim, func(c *Cache) (*Kind[*corev1.ConfigMap], error) {
		return Typed[*corev1.ConfigMap](c, corev1.SchemeGroupVersion.WithResource("configmaps"), opts)
	}, func(cm *corev1.ConfigMap) { onEvent(cm) })
}

// startSDKMetadata caches the ConfigMaps' metadata only.
func startSDKMetadata(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap)) func() {
	return startSDKKind(b, sim, func(c *Cache) (*Kind[*metav1.PartialObjectMetadata], error) {
		return Metadata(c, corev1.SchemeGroupVersion.WithResource("configmaps"), KindOptions{})
	}, func(m *metav1.PartialObjectMetadata) { onEvent(&corev1.ConfigMap{ObjectMeta: m.ObjectMeta}) })
}

// startSDKKind caches the kind on every simulated member, calling onUpdate for each update, and
// returns once every member has synced.
func startSDKKind[T runtimepkg.Object](b *testing.B, sim *simmembers.Members, kind func(*Cache) (*Kind[T], error), onUpdate func(T)) func() {
	members := multicluster.MembersOf(simmembers.Resolver(b), sim.Clusters("sim"), multicluster.FleetOptions{})
	c := New(fleettest.Fixed(members))
	k, err := kind(c)
	if err != nil {
		b.Fatal(err)
	}
	if err := k.AddEventHandler(func(ev Event[T]) {
		if ev.Type == Updated {
			onUpdate(ev.Object)
		}
	}); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := k.WaitForCacheSync(context.Background(), time.Minute); err != nil {
		b.Fatal(err)
	}
	return c.Stop
}

// startMetadataPeer is the hand-rolled metadata-only peer: a metadata client and informer
// factory per member.
func startMetadataPeer(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap)) func() {
	resolver := simmembers.Resolver(b)
	ctx, cancel := context.WithCancel(context.Background())
	var synced []cache.InformerSynced
	var factories []metadatainformer.SharedInformerFactory
	clusters := sim.Clusters("sim")
	for i := range clusters {
		a, err := resolver.Resolve(ctx, &clusters[i])
		if err != nil {
			b.Fatal(err)
		}
		meta, err := metadata.NewForConfigAndClient(rest.CopyConfig(a.Config), a.HTTPClient)
		if err != nil {
			b.Fatal(err)
		}
		factory := metadatainformer.NewSharedInformerFactory(meta, 0)
		inf := factory.ForResource(corev1.SchemeGroupVersion.WithResource("configmaps")).Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
			onEvent(&corev1.ConfigMap{ObjectMeta: obj.(*metav1.PartialObjectMetadata).ObjectMeta})
		}}); err != nil {
			b.Fatal(err)
		}
		synced = append(synced, inf.HasSynced)
		factories = append(factories, factory)
		factory.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		b.Fatal("the metadata peer's caches did not sync")
	}
	return func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
	}
}

// startPeer is what a tool writes without the SDK: a clientset and informer factory per member,
// on the member's resolved config.
func startPeer(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap)) func() {
	resolver := simmembers.Resolver(b)
	ctx, cancel := context.WithCancel(context.Background())
	var synced []cache.InformerSynced
	var factories []informers.SharedInformerFactory
	clusters := sim.Clusters("sim")
	for i := range clusters {
		a, err := resolver.Resolve(ctx, &clusters[i])
		if err != nil {
			b.Fatal(err)
		}
		cfg := rest.CopyConfig(a.Config)
		cfg.ContentType = runtimepkg.ContentTypeProtobuf
		cfg.AcceptContentTypes = runtimepkg.ContentTypeProtobuf + "," + runtimepkg.ContentTypeJSON
		kube, err := kubernetes.NewForConfigAndClient(cfg, a.HTTPClient)
		if err != nil {
			b.Fatal(err)
		}
		factory := informers.NewSharedInformerFactory(kube, 0)
		inf := factory.Core().V1().ConfigMaps().Informer()
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
			onEvent(obj.(*corev1.ConfigMap))
		}}); err != nil {
			b.Fatal(err)
		}
		synced = append(synced, inf.HasSynced)
		factories = append(factories, factory)
		factory.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		b.Fatal("the peer's caches did not sync")
	}
	return func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
	}
}

// startControllerRuntimePeer engages each member as multicluster-runtime does: a
// controller-runtime cluster.Cluster per member (its cache, client and RESTMapper), started, and
// an informer for the kind from its cache.
func startControllerRuntimePeer(b *testing.B, sim *simmembers.Members, onEvent func(*corev1.ConfigMap)) func() {
	resolver := simmembers.Resolver(b)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var caches []crcache.Cache
	clusters := sim.Clusters("sim")
	for i := range clusters {
		a, err := resolver.Resolve(ctx, &clusters[i])
		if err != nil {
			b.Fatal(err)
		}
		cl, err := crcluster.New(rest.CopyConfig(a.Config), func(o *crcluster.Options) { o.HTTPClient = a.HTTPClient })
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() { _ = cl.Start(ctx) })
		inf, err := cl.GetCache().GetInformer(ctx, &corev1.ConfigMap{}, crcache.BlockUntilSynced(false))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
			onEvent(obj.(*corev1.ConfigMap))
		}}); err != nil {
			b.Fatal(err)
		}
		caches = append(caches, cl.GetCache())
	}
	for _, c := range caches {
		if !c.WaitForCacheSync(ctx) {
			b.Fatal("the controller-runtime peer's caches did not sync")
		}
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// simWriter asks simulated members to write, on their debug path.
func simWriter(_ testing.TB, sim *simmembers.Members) *http.Client { return sim.Client() }

// The benchmarks' instrument: simulated members serve their ConfigMaps to a cache, by list or by
// watch-list, and a write reaches the handler with the time it was asked.
func TestSimulatedMembersCache(t *testing.T) {
	checkInstrument(t, 3, func(c *Cache) (*Kind[*corev1.ConfigMap], error) {
		return Typed[*corev1.ConfigMap](c, corev1.SchemeGroupVersion.WithResource("configmaps"), KindOptions{})
	})
}

// The instrument serves metadata-only clients too: the Metadata kind lists and watches
// PartialObjectMetadata, managed fields dropped as in every kind.
func TestSimulatedMembersMetadata(t *testing.T) {
	all := checkInstrument(t, 2, func(c *Cache) (*Kind[*metav1.PartialObjectMetadata], error) {
		return Metadata(c, corev1.SchemeGroupVersion.WithResource("configmaps"), KindOptions{})
	})
	if o := all[0].Object; o.Labels["app"] != "sim" || o.ManagedFields != nil {
		t.Fatalf("cached metadata: labels %v, %d managed fields", o.Labels, len(o.ManagedFields))
	}
}

// The instrument's Pod churn (simmembers.ChurnPath) reaches a Pod cache: each call a Pod made and
// the one before it deleted, so the member keeps one Pod more than its fixed ones.
func TestSimulatedMembersChurnPods(t *testing.T) {
	sim := simmembers.Start(t, 1, 0)
	c := New(fleettest.Fixed(multicluster.MembersOf(simmembers.Resolver(t), sim.Clusters("sim"), multicluster.FleetOptions{})))
	pods, err := Typed[*corev1.Pod](c, corev1.SchemeGroupVersion.WithResource("pods"), KindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 100)
	if err := pods.AddEventHandler(func(ev Event[*corev1.Pod]) {
		if strings.HasPrefix(ev.Object.Name, "churn-") {
			seen <- ev.Type.String() + " " + ev.Object.Name
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if err := pods.WaitForCacheSync(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// As in checkInstrument: churn until the watch, which may still be opening, has the first.
	client := sim.Client()
	churn := func() {
		resp, err := client.Get(sim.Servers[0] + simmembers.ChurnPath)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var first string
	for deadline := time.Now().Add(10 * time.Second); first == ""; {
		churn()
		select {
		case first = <-seen:
		case <-time.After(time.Second):
			if time.Now().After(deadline) {
				t.Fatal("no churned Pod reached the cache")
			}
		}
	}
	churn()
	want := []string{"Added churn-" + strings.TrimPrefix(first, "Added churn-")}
	if !strings.HasPrefix(first, "Added churn-") {
		t.Fatalf("first churn event %q, want an Added", first)
	}
	var n int
	fmt.Sscanf(strings.TrimPrefix(first, "Added churn-"), "%d", &n)
	want = append(want, fmt.Sprintf("Added churn-%d", n+1), fmt.Sprintf("Deleted churn-%d", n))
	got := []string{first, <-seen, <-seen}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("churn events %v, want %v", got, want)
	}
	if all := pods.ListAll(nil); len(all) != simmembers.PodsPerMember+1 {
		t.Fatalf("%d Pods cached, want %d", len(all), simmembers.PodsPerMember+1)
	}
}

// checkInstrument caches a kind of ConfigMaps on n simulated members, checks that every member's
// objects are cached and that a write to the last member reaches the handler with its time, and
// returns what is cached.
func checkInstrument[T interface {
	runtimepkg.Object
	metav1.Object
}](t *testing.T, n int, kind func(*Cache) (*Kind[T], error)) []Item[T] {
	t.Helper()
	sim := simmembers.Start(t, n, time.Millisecond)
	members := multicluster.MembersOf(simmembers.Resolver(t), sim.Clusters("sim"), multicluster.FleetOptions{})
	c := New(fleettest.Fixed(members))
	k, err := kind(c)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	if err := k.AddEventHandler(func(ev Event[T]) {
		if ev.Type == Updated {
			got <- ev.Member.Name().Name + " " + ev.Object.GetAnnotations()[simmembers.SentAnnotation]
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	if err := k.WaitForCacheSync(context.Background(), 30*time.Second); err != nil {
		t.Fatal(err)
	}
	all := k.ListAll(nil)
	if len(all) != n*simmembers.ObjectsPerMember {
		t.Fatalf("%d ConfigMaps cached, want %d", len(all), n*simmembers.ObjectsPerMember)
	}
	// A synced cache may still be opening its watch, and a simulated member sends a write only to
	// the watches open then (under CI's load, one write was once lost so): write again each second.
	writer, deadline := simWriter(t, sim), time.After(10*time.Second)
	for {
		resp, err := writer.Get(sim.Servers[n-1] + "/debug/write?t=12345")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		select {
		case ev := <-got:
			if want := fmt.Sprintf("member-%05d 12345", n-1); ev != want {
				t.Fatalf("event %q, want %q", ev, want)
			}
			return all
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatal("the write never reached the handler")
		}
	}
}
