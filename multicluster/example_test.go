package multicluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// A controller resolves a Cluster from the registry into a rest.Config for its member. It prefers
// the projected token it was given; the Cluster also offers an exec plugin for people.
func ExampleResolver_Resolve() {
	tokens, _ := os.MkdirTemp("", "tokens")
	defer os.RemoveAll(tokens)
	_ = os.WriteFile(filepath.Join(tokens, "edge-3"), []byte("projected-token"), 0o600)

	cluster := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "edge-3"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
					{ClientCIDR: "0.0.0.0/0", ServerAddress: "edge-3.example.com"},
					{ClientCIDR: "10.0.0.0/8", ServerAddress: "10.3.0.1:6443"},
				},
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{
				{Name: "ops", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeExec},
					Config: map[string]string{"command": "ops-login"}},
				{Name: "projected", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeTokenFile},
					Config: map[string]string{"path": filepath.Join(tokens, "edge-3")}},
			}},
		},
	}

	resolver, err := multicluster.NewResolver(multicluster.ResolverOptions{
		Prefer: []string{v1alpha1.ProviderTypeTokenFile, v1alpha1.ProviderTypeSecret},
		// The projected token is for edge-3 alone: whatever a Cluster's editor writes, it goes
		// nowhere else.
		FileRoots: []multicluster.FileRoot{{Dir: tokens, SendTo: multicluster.Servers("edge-3.example.com", "10.3.0.1:6443")}},
		ClientIP:  netip.MustParseAddr("10.1.2.3"), // inside the data centre
	})
	if err != nil {
		panic(err)
	}
	access, err := resolver.Resolve(context.Background(), cluster)
	if err != nil {
		panic(err)
	}
	fmt.Println("server:", access.Config.Host)
	fmt.Println("provider:", access.Provider, access.ProviderType)
	// Build clients on the shared HTTP client, e.g.:
	// kubernetes.NewForConfigAndClient(access.Config, access.HTTPClient)

	// Output:
	// server: https://10.3.0.1:6443
	// provider: projected token-file
}

// opsLogin lets Clusters use the ops-login plugin, whose credentials may go to the company's own
// API servers only.
var opsLogin = multicluster.ExecPlugin{
	Command: "ops-login",
	SendTo: multicluster.ServerFunc(func(_ *v1alpha1.Cluster, server *url.URL) bool {
		return strings.HasSuffix(server.Hostname(), ".example.com")
	}),
}

// exampleFleet is a fleet of three Clusters that people reach through an exec plugin. Nothing in
// the examples below connects to them.
func exampleFleet() *multicluster.Fleet {
	resolver, err := multicluster.NewResolver(multicluster.ResolverOptions{ExecPlugins: []multicluster.ExecPlugin{opsLogin}})
	if err != nil {
		panic(err)
	}
	return multicluster.StaticFleet(resolver, exampleClusters(v1alpha1.ProviderTypeExec), multicluster.FleetOptions{})
}

// exampleClusters are three Clusters, edge-1 to edge-3, each with one auth provider "ops" of the
// given type.
func exampleClusters(providerType string) []v1alpha1.Cluster {
	var config map[string]string
	if providerType == v1alpha1.ProviderTypeExec {
		config = map[string]string{"command": "ops-login"}
	}
	var clusters []v1alpha1.Cluster
	for _, name := range []string{"edge-1", "edge-2", "edge-3"} {
		clusters = append(clusters, v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Labels: map[string]string{"tier": "edge"}},
			Spec: v1alpha1.ClusterSpec{
				KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
					{ClientCIDR: "0.0.0.0/0", ServerAddress: name + ".example.com:6443"},
				}},
				AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{
					Name: "ops", Type: v1alpha1.AuthProviderType{Name: providerType}, Config: config,
				}}},
			},
		})
	}
	return clusters
}

// Map runs a function on every member at once and returns each member's value or error, in the
// members' order. Here it asks which API server each member resolves to.
func ExampleMap() {
	fleet := exampleFleet()
	results := multicluster.Map(context.Background(), fleet.Members(),
		func(ctx context.Context, m *multicluster.Member) (string, error) {
			access, err := m.Access(ctx)
			if err != nil {
				return "", err
			}
			return access.Server.String(), nil
		},
		multicluster.Concurrency(10), multicluster.Timeout(5*time.Second))
	for _, r := range results {
		fmt.Println(r.Member, r.Value, r.Err)
	}
	// Output:
	// fleet/edge-1 https://edge-1.example.com:6443 <nil>
	// fleet/edge-2 https://edge-2.example.com:6443 <nil>
	// fleet/edge-3 https://edge-3.example.com:6443 <nil>
}

// ForEach is Map for work without a value. A canary member goes first; the rest run only if it
// succeeds. Failed returns the members to look at, each with its error.
func ExampleForEach() {
	fleet := exampleFleet()
	results := multicluster.ForEach(context.Background(), fleet.Members(),
		func(ctx context.Context, m *multicluster.Member) error {
			// A real callback would use m.Kubernetes(ctx), m.Dynamic(ctx) or m.Client(ctx).
			if m.Name().Name == "edge-2" {
				return errors.New("quota exceeded")
			}
			return nil
		},
		multicluster.Canary(1), multicluster.NoRetry())
	fmt.Println("succeeded:", len(results.Succeeded()))
	for _, r := range results.Failed() {
		fmt.Println("failed:", r.Member, r.Err)
	}
	// Output:
	// succeeded: 2
	// failed: fleet/edge-2 quota exceeded
}
