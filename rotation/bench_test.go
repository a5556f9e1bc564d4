package rotation_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// BenchmarkRotate: a Rotator over 10,000 simulated members (20ms latency, in other processes)
// whose tokens, in Secrets of the real registry, are all due at once, as after joining them
// together; then a pass with nothing due. Run it once (-benchtime 1x). Reported:
//   - renewals/s and registry-writes/s: the first pass's pace (one Secret update per renewal),
//     with the default Concurrency;
//   - CPU-µs/renewal: the Rotator's own CPU per renewal (the members run in other processes),
//     registry and member requests included;
//   - idle-pass-ms and idle-registry-reads: a pass when nothing is due (the Rotator reads a
//     Secret again only when its token is due).
func BenchmarkRotate(b *testing.B) {
	realservers.Required(b)
	n := benchMembers(b, 10000)
	ctx := context.Background()
	sims := simmembers.Start(b, n, 20*time.Millisecond)
	bulk := rest.CopyConfig(lf.Registry.Config)
	bulk.QPS, bulk.Burst = -1, 0
	kube := kubernetes.NewForConfigOrDie(bulk)
	ns := "sim-rotation"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	clusters := createDueTokens(b, kube, sims, ns)
	members := connectedMembers(b, kube, ns, clusters)
	requests := &countingTransport{}
	counted := rest.CopyConfig(bulk)
	counted.Wrap(requests.wrap)
	r, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: kubernetes.NewForConfigOrDie(counted)})
	if err != nil {
		b.Fatal(err)
	}
	if b.N > 1 {
		b.Fatal("run it once (-benchtime 1x): the first pass renews every token")
	}
	b.ResetTimer()
	for range b.N {
		cpu, start := simmembers.ProcessCPU(), time.Now()
		renewed, errs := r.RenewDue(ctx)
		elapsed, used := time.Since(start), simmembers.ProcessCPU()-cpu
		if len(errs) > 0 {
			b.Fatalf("%d failures, the first: %v", len(errs), errs[0])
		}
		if len(renewed) != n {
			b.Fatalf("renewed %d of %d", len(renewed), n)
		}
		writes := requests.writes.Load()
		b.ReportMetric(float64(n)/elapsed.Seconds(), "renewals/s")
		b.ReportMetric(float64(writes)/elapsed.Seconds(), "registry-writes/s")
		b.ReportMetric(float64(used.Microseconds())/float64(n), "CPU-µs/renewal")

		reads := requests.reads.Load()
		start = time.Now()
		renewed, errs = r.RenewDue(ctx)
		if len(renewed) != 0 || len(errs) != 0 {
			b.Fatalf("an idle pass renewed %d and failed %d", len(renewed), len(errs))
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "idle-pass-ms")
		b.ReportMetric(float64(requests.reads.Load()-reads), "idle-registry-reads")
	}
}

// createDueTokens stores, for each of sims' members, a Secret of a token issued 50 minutes ago,
// of an hour (past two thirds of its life), and returns their Clusters, which point at them.
func createDueTokens(b *testing.B, kube kubernetes.Interface, sims *simmembers.Members, ns string) []v1alpha1.Cluster {
	ctx := context.Background()
	clusters := sims.Clusters(ns)
	issued := time.Now().Add(-50 * time.Minute)
	toCreate := make([]*multicluster.Member, len(clusters))
	for i := range clusters {
		c := &clusters[i]
		c.Spec.AuthInfo.Providers = []v1alpha1.AuthProviderConfig{{Name: "token", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret},
			Config: map[string]string{"name": c.Name + "-token"}}}
		toCreate[i] = multicluster.NewMember(c, multicluster.Clients{})
	}
	if err := multicluster.ForEach(ctx, toCreate, func(ctx context.Context, m *multicluster.Member) error {
		c := m.Cluster()
		server := c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress
		_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: c.Name + "-token", Annotations: map[string]string{
				v1alpha1.ServersAnnotation: server, v1alpha1.ServiceAccountAnnotation: "clusterregistry-sim/sim"}},
			Data: map[string][]byte{"token": []byte(simmembers.IssuedToken("clusterregistry-sim", "sim", "token-binding-0", issued)), "ca.crt": sims.CA},
		}, metav1.CreateOptions{})
		return err
	}, multicluster.Concurrency(64), multicluster.RetryIf(multicluster.IsTransient)).Err(); err != nil {
		b.Fatal(err)
	}
	return clusters
}

// connectedMembers are the members of clusters, resolved from an informer's Secrets as the health
// command does, and connected already, as in a process that probes or watches them (health, a
// cache): CPU-µs/renewal is then the renewal's, not the first connection's.
func connectedMembers(b *testing.B, kube kubernetes.Interface, ns string, clusters []v1alpha1.Cluster) []*multicluster.Member {
	ctx := context.Background()
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns))
	secrets := factory.Core().V1().Secrets()
	secrets.Informer()
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) })
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromLister(secrets.Lister())})
	if err != nil {
		b.Fatal(err)
	}
	members := multicluster.MembersOf(resolver, clusters, multicluster.FleetOptions{})
	if err := multicluster.ForEach(ctx, members, func(ctx context.Context, m *multicluster.Member) error {
		kube, err := m.Kubernetes(ctx)
		if err == nil {
			_, err = kube.Discovery().ServerVersion()
		}
		return err
	}, multicluster.Concurrency(64)).Err(); err != nil {
		b.Fatal(err)
	}
	return members
}

// countingTransport counts a client's reads (GET) and writes (every other method).
type countingTransport struct{ reads, writes atomic.Int64 }

func (c *countingTransport) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if req.Method == http.MethodGet {
			c.reads.Add(1)
		} else {
			c.writes.Add(1)
		}
		return next.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// benchMembers is ROTATE_BENCH_MEMBERS, or n: fewer, for a quick look.
func benchMembers(b *testing.B, n int) int {
	if v := os.Getenv("ROTATE_BENCH_MEMBERS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal("ROTATE_BENCH_MEMBERS:", err)
		}
	}
	return n
}
