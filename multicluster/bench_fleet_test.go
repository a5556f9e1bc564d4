package multicluster

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/informers/externalversions"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// benchFleetSize is the registry's size in BenchmarkFleet.
const benchFleetSize = 10000

var (
	benchFleetOnce sync.Once
	benchFleetNS   string
	benchFleetErr  error
)

// benchFleetRegistry fills a namespace of the test registry with benchFleetSize Clusters shaped
// as localfleet registers members: labels, one endpoint, a pinned-Secret provider. Once per run.
func benchFleetRegistry(b *testing.B) string {
	b.Helper()
	benchFleetOnce.Do(func() {
		ctx := context.Background()
		cfg := rest.CopyConfig(registry.Config)
		cfg.QPS, cfg.Burst = -1, 0 // the registry protects itself; this is a bulk load
		clusters := versioned.NewForConfigOrDie(cfg).ClusterregistryV1alpha1()
		benchFleetNS = fmt.Sprintf("bench-fleet-%d", time.Now().UnixNano())
		if _, err := kubeClient(b, registry).CoreV1().Namespaces().Create(ctx, namespaceObject(benchFleetNS), metav1.CreateOptions{}); err != nil {
			benchFleetErr = err
			return
		}
		items := make([]*Member, benchFleetSize)
		for i := range items {
			c := offlineCluster(fmt.Sprintf("member-%05d", i), fmt.Sprintf("https://10.%d.%d.1:6443", i/250, i%250), nil,
				v1alpha1.AuthProviderConfig{Name: "controller", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret},
					Config: map[string]string{"name": fmt.Sprintf("member-%05d-token", i)}})
			c.Namespace, c.UID = benchFleetNS, ""
			c.Labels = map[string]string{"env": []string{"prod", "dev"}[i%2], "region": fmt.Sprintf("r%d", i%10)}
			items[i] = NewMember(c, Clients{})
		}
		benchFleetErr = ForEach(ctx, items, func(ctx context.Context, m *Member) error {
			_, err := clusters.Clusters(benchFleetNS).Create(ctx, m.Cluster(), metav1.CreateOptions{})
			return err
		}, Concurrency(64), RetryIf(IsTransient)).Err()
	})
	if benchFleetErr != nil {
		b.Fatal(benchFleetErr)
	}
	return benchFleetNS
}

// BenchmarkFleet: a Fleet of 10,000 Clusters on the real registry, beside client-go's generated
// informer for the same Clusters as the peer. Reported:
//   - sync: ms to sync the whole Fleet (Start returning), per 10,000 and per member (target
//     under 1 s), and the peer informer's time to sync in the same run;
//   - idle-heap: heap per idle member, informer copy included (target at most 2 KiB), and the
//     peer informer's heap per Cluster;
//   - Members and Select: the cost of the member list that every fan-out starts from (target
//     under 50 µs and no allocation for Members while membership is unchanged).
func BenchmarkFleet(b *testing.B) {
	realservers.Required(b)
	ns := benchFleetRegistry(b)
	client := versioned.NewForConfigOrDie(registry.Config)
	resolver := newResolver(b, access.ResolverOptions{})
	opts := FleetOptions{Namespaces: []string{ns}}

	b.Run("sync", func(b *testing.B) {
		var fleetTime, peerTime time.Duration
		for b.Loop() {
			start := time.Now()
			f := NewFleet(client, resolver, opts)
			if err := f.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			fleetTime += time.Since(start)
			if f.Len() != benchFleetSize {
				b.Fatalf("fleet of %d, want %d", f.Len(), benchFleetSize)
			}
			f.Stop()

			start = time.Now()
			stop := startPeerInformer(b, client, ns)
			peerTime += time.Since(start)
			stop()
		}
		b.ReportMetric(float64(fleetTime.Milliseconds())/float64(b.N), "sync-ms/10k")
		b.ReportMetric(float64(peerTime.Milliseconds())/float64(b.N), "peer-informer-sync-ms/10k")
		b.ReportMetric(float64(fleetTime)/float64(peerTime), "sync-ratio-to-peer")
	})

	b.Run("idle-heap", func(b *testing.B) {
		for b.Loop() {
			heap0, _ := simmembers.SettledHeapAndGoroutines()
			f := NewFleet(client, resolver, opts)
			if err := f.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			_ = f.Members()
			heap1, _ := simmembers.SettledHeapAndGoroutines()
			runtime.KeepAlive(f)
			f.Stop()

			stop := startPeerInformer(b, client, ns)
			heap2, _ := simmembers.SettledHeapAndGoroutines()
			stop()
			fleetPer, peerPer := float64(heap1-heap0)/benchFleetSize, float64(heap2-heap0)/benchFleetSize
			b.ReportMetric(fleetPer/1024, "KiB/idle-member")
			b.ReportMetric(peerPer/1024, "peer-informer-KiB/cluster")
		}
	})

	f := NewFleet(client, resolver, opts)
	if err := f.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer f.Stop()
	_ = f.Members() // built once per membership; what follows is every later call
	b.Run("Members", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(f.Members()) != benchFleetSize {
				b.Fatal("members lost")
			}
		}
	})
	prod := labels.SelectorFromSet(labels.Set{"env": "prod"})
	b.Run("Select", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if len(f.Select(prod)) != benchFleetSize/2 {
				b.Fatal("selection lost")
			}
		}
	})
}

// startPeerInformer runs client-go's generated informer over the namespace's Clusters, as a tool
// without this SDK would, and returns once it has synced.
func startPeerInformer(b *testing.B, client versioned.Interface, ns string) (stop func()) {
	factory := externalversions.NewSharedInformerFactoryWithOptions(client, 0, externalversions.WithNamespace(ns))
	informer := factory.Clusterregistry().V1alpha1().Clusters().Informer()
	done := make(chan struct{})
	factory.Start(done)
	if !cache.WaitForCacheSync(done, informer.HasSynced) {
		b.Fatal("peer informer did not sync")
	}
	if n := len(informer.GetStore().ListKeys()); n != benchFleetSize {
		b.Fatalf("peer informer holds %d, want %d", n, benchFleetSize)
	}
	return func() { close(done); factory.Shutdown() }
}

func namespaceObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
