package clusterprofile_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

var benchClusters = flag.Int("clusters", 10000, "Clusters in BenchmarkPublish")

// BenchmarkPublish: a Publisher over 10,000 Clusters of a real registry (each Ready, with a
// version and an ID). Reported: the time from Run until every Cluster has its profile with its
// status, the writes that took (per Cluster; refused ones, 409 Conflict, apart), and the writes
// per second over the 10 seconds after (at steady state: zero).
func BenchmarkPublish(b *testing.B) {
	realservers.Required(b)
	n := *benchClusters
	ctx := context.Background()
	bulk := rest.CopyConfig(lf.Registry.Config)
	bulk.QPS, bulk.Burst = -1, 0
	for i := range b.N {
		ns := fmt.Sprintf("bench-publish-%d-%d", time.Now().UnixNano(), i)
		registerClusters(b, bulk, ns, n)

		var writes, conflicts atomic.Int64
		counting := rest.CopyConfig(bulk)
		counting.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				resp, err := rt.RoundTrip(r)
				if r.Method != http.MethodGet && err == nil {
					switch {
					case resp.StatusCode < 300:
						writes.Add(1)
					case resp.StatusCode == http.StatusConflict:
						conflicts.Add(1)
					}
				}
				return resp, err
			})
		}
		resolver, err := access.NewResolver(access.ResolverOptions{Providers: map[string]access.Provider{
			"bench": access.ProviderFunc(func(context.Context, *access.Request) (*access.Credentials, error) {
				return &access.Credentials{BearerToken: "bench"}, nil
			}),
		}})
		if err != nil {
			b.Fatal(err)
		}
		p, err := clusterprofile.NewPublisher(versioned.NewForConfigOrDie(bulk), cpversioned.NewForConfigOrDie(counting),
			clusterprofile.PublishOptions{Namespaces: []string{ns}, Resolver: resolver, Workers: 16})
		if err != nil {
			b.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		b.ResetTimer()
		began := time.Now()
		go func() { done <- p.Run(runCtx) }()
		// Each Cluster takes two writes: the profile, then its status.
		for writes.Load() < int64(2*n) {
			time.Sleep(10 * time.Millisecond)
		}
		first := time.Since(began)
		b.StopTimer()
		settled, settledConflicts := writes.Load(), conflicts.Load()
		time.Sleep(10 * time.Second)
		steady := writes.Load() - settled + conflicts.Load() - settledConflicts
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(first.Seconds(), "first-publish-s")
		b.ReportMetric(float64(settled)/float64(n), "writes/cluster")
		b.ReportMetric(float64(settledConflicts)/float64(n), "conflicts/cluster")
		b.ReportMetric(float64(steady)/10, "steady-writes/s")
	}
}

// registerClusters creates n Ready Clusters in ns, each with its own server.
func registerClusters(b *testing.B, bulk *rest.Config, ns string, n int) {
	clusters := versioned.NewForConfigOrDie(bulk).ClusterregistryV1alpha1().Clusters(ns)
	items := make([]v1alpha1.Cluster, n)
	for i := range items {
		items[i] = v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("member-%05d", i)},
			Spec: v1alpha1.ClusterSpec{
				DisplayName: fmt.Sprintf("Member %d", i),
				KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
					{ClientCIDR: "0.0.0.0/0", ServerAddress: fmt.Sprintf("https://10.%d.%d.1:6443", i/250, i%250)}}},
				AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "bench", Type: v1alpha1.AuthProviderType{Name: "bench"}}}},
			},
		}
	}
	fleettest.CreateClusters(b, bulk, ns, items, func(ctx context.Context, created *v1alpha1.Cluster) error {
		created.Status.Version = "v1.36.3"
		created.Status.ClusterID = fmt.Sprintf("uid-%s", created.Name)
		created.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReachable})
		_, err := clusters.UpdateStatus(ctx, created, metav1.UpdateOptions{})
		return err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
