package multicluster

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// registry holds the Clusters and credential Secrets; member is the cluster they point at. Both
// are real kube-apiservers with etcd, from a local fleet of one member. Tests register the member
// again in namespaces of their own, with the credentials each test is about.
var registry, member *localfleet.Server

func TestMain(m *testing.M) {
	// The benchmarks' simulated members run in a child process of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 1}, func(lf *localfleet.Fleet) error {
		registry, member = lf.Registry, lf.Members[0].Server
		return nil
	})
}

// lf is the local fleet that registry and member are of.
var lf *localfleet.Fleet

const testTimeout = 90 * time.Second

// testClientIP is the client address the tests' Resolvers state, so that no test depends on this
// machine's routes.
var testClientIP = netip.MustParseAddr("127.0.0.1")

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func kubeClient(t testing.TB, env *localfleet.Server) kubernetes.Interface {
	t.Helper()
	if env == nil {
		realservers.Required(t)
	}
	return kubernetes.NewForConfigOrDie(env.Config)
}

// newResolver is a access.Resolver that reads Secrets from the registry as an admin would.
func newResolver(t testing.TB, opts access.ResolverOptions) *access.Resolver {
	t.Helper()
	if opts.Secrets == nil && registry != nil { // pure policy tests under -short read no Secret
		opts.Secrets = access.SecretsFromClient(kubeClient(t, registry))
	}
	if !opts.ClientIP.IsValid() {
		opts.ClientIP = testClientIP
	}
	r, err := access.NewResolver(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// offlineCluster is a Cluster object that need not be stored anywhere.
func offlineCluster(name, server string, ca []byte, providers ...v1alpha1.AuthProviderConfig) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", UID: types.UID("uid-" + name)},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}},
				CABundle:        ca,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: providers},
		},
	}
}

// storedCluster writes a Cluster pointing at server and trusting ca, and returns it as the
// registry serves it.
func storedCluster(t *testing.T, ns, name, server string, ca []byte, providers ...v1alpha1.AuthProviderConfig) *v1alpha1.Cluster {
	t.Helper()
	c := offlineCluster(name, server, ca, providers...)
	c.Namespace, c.UID = ns, ""
	created, err := versioned.NewForConfigOrDie(registry.Config).ClusterregistryV1alpha1().Clusters(ns).Create(testContext(t), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}
