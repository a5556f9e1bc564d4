package multicluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

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

	resolver, err := multicluster.NewResolver(multicluster.Options{
		Prefer:    []string{v1alpha1.ProviderTypeTokenFile, v1alpha1.ProviderTypeSecret},
		FileRoots: []string{tokens},
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
