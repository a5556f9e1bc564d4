package access_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
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

	resolver, err := access.NewResolver(access.ResolverOptions{
		Prefer: []string{v1alpha1.ProviderTypeTokenFile, v1alpha1.ProviderTypeSecret},
		// The projected token is for edge-3 alone: whatever a Cluster's editor writes, it goes
		// nowhere else.
		FileRoots: []access.FileRoot{{Dir: tokens, SendTo: access.Servers("edge-3.example.com", "10.3.0.1:6443")}},
		ClientIP:  netip.MustParseAddr("10.1.2.3"), // inside the data centre
	})
	if err != nil {
		panic(err)
	}
	resolved, err := resolver.Resolve(context.Background(), cluster)
	if err != nil {
		panic(err)
	}
	fmt.Println("server:", resolved.Config.Host)
	fmt.Println("provider:", resolved.Provider, resolved.ProviderType)
	// Build clients on the shared HTTP client, e.g.:
	// kubernetes.NewForConfigAndClient(resolved.Config, resolved.HTTPClient)

	// Output:
	// server: https://10.3.0.1:6443
	// provider: projected token-file
}

// A provider type of the tool's own: credentials from the tool's secret store, looked up by the
// pointer in the Cluster's config. Request.Server says where the credentials will be sent, so a
// provider can refuse servers its credentials are not meant for.
func ExampleProviderFunc() {
	vault := access.ProviderFunc(func(ctx context.Context, req *access.Request) (*access.Credentials, error) {
		path := req.Config("path", "clusters/"+req.Cluster.Name)
		if req.Server.Hostname() != req.Cluster.Name+".example.com" {
			return nil, fmt.Errorf("%s is only for %s.example.com", path, req.Cluster.Name)
		}
		return &access.Credentials{BearerToken: "token-from-" + path, Revision: "v1"}, nil
	})
	resolver, err := access.NewResolver(access.ResolverOptions{
		Providers: map[string]access.Provider{"vault": vault},
	})
	if err != nil {
		panic(err)
	}
	cluster := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "edge-1"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: "edge-1.example.com:6443"},
			}},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{
				Name: "ops", Type: v1alpha1.AuthProviderType{Name: "vault"},
			}}},
		},
	}
	resolved, err := resolver.Resolve(context.Background(), cluster)
	if err != nil {
		panic(err)
	}
	fmt.Println(resolved.Provider, resolved.ProviderType, resolved.Config.BearerToken != "")
	// Output: ops vault true
}
