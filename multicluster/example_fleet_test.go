package multicluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// A controller follows the registry: members added, edited or removed are seen without a
// restart, and a removed member's clients are dropped. Subscribe tells per-member state when to
// start and stop. The registry here is the generated fake clientset, as in a tool's unit test; a
// tool passes versioned.NewForConfig(its registry's rest.Config), and its integration tests a
// local fleet's (see localfleet).
func ExampleNewFleet() {
	ctx := context.Background()
	cluster := func(name string) *v1alpha1.Cluster {
		return &v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Labels: map[string]string{"env": "prod"}},
			Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: name + ".example.com"}},
			}},
		}
	}
	// NewSimpleClientset: NewClientset needs an OpenAPI schema that the generated code lacks yet.
	registry := fake.NewSimpleClientset(cluster("prod-eu-1"), cluster("prod-us-1")) //nolint:staticcheck

	resolver, err := access.NewResolver(access.ResolverOptions{
		// Secrets are read from the registry with the tool's own permissions, e.g.
		// access.SecretsFromClient(kubernetes.NewForConfigOrDie(registryConfig)).
	})
	if err != nil {
		panic(err)
	}
	fleet := multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{
		Namespaces: []string{"fleet"},
		Selector:   labels.SelectorFromSet(labels.Set{"env": "prod"}),
	})
	if err := fleet.Start(ctx); err != nil { // returns once every matching Cluster is held
		panic(err)
	}
	defer fleet.Stop()
	fmt.Println(fleet.Members(), fleet.Status().Fresh())

	events := make(chan multicluster.MemberEvent, 10)
	unsubscribe := fleet.Subscribe(func(ev multicluster.MemberEvent) { events <- ev })
	defer unsubscribe()
	for range fleet.Len() {
		<-events // MemberAdded for each member already there
	}
	if _, err := registry.ClusterregistryV1alpha1().Clusters("fleet").Create(ctx, cluster("prod-ap-1"), metav1.CreateOptions{}); err != nil {
		panic(err)
	}
	ev := <-events
	fmt.Println(ev.Type, ev.Member)
	fmt.Println(fleet.Members())
	// Output:
	// [fleet/prod-eu-1 fleet/prod-us-1] true
	// Added fleet/prod-ap-1
	// [fleet/prod-ap-1 fleet/prod-eu-1 fleet/prod-us-1]
}

// A tool without access to a registry works from a file, such as `kubectl get clusters -o yaml`
// wrote. Every Cluster is validated as the server would; errors name the cluster and field.
func ExampleLoadMembers() {
	dir, _ := os.MkdirTemp("", "fleet")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "clusters.yaml")
	_ = os.WriteFile(path, []byte(`apiVersion: v1
kind: List
items:
- apiVersion: clusterregistry.k8s.io/v1alpha1
  kind: Cluster
  metadata: {name: prod-eu-1, namespace: fleet, labels: {env: prod}}
  spec:
    kubernetesApiEndpoints:
      serverEndpoints: [{clientCIDR: 0.0.0.0/0, serverAddress: "prod-eu-1.example.com:6443"}]
    authInfo:
      providers: [{name: ops, type: {name: exec}, config: {command: ops-login}}]
- apiVersion: clusterregistry.k8s.io/v1alpha1
  kind: Cluster
  metadata: {name: dev-eu-1, namespace: fleet, labels: {env: dev}}
  spec:
    kubernetesApiEndpoints:
      serverEndpoints: [{clientCIDR: 0.0.0.0/0, serverAddress: "dev-eu-1.example.com:6443"}]
`), 0o600)

	resolver, err := access.NewResolver(access.ResolverOptions{ExecPlugins: []access.ExecPlugin{opsLogin}})
	if err != nil {
		panic(err)
	}
	members, err := multicluster.LoadMembers(path, resolver, multicluster.FleetOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(members)
	prod, err := multicluster.LoadMembers(path, resolver, multicluster.FleetOptions{
		Selector: labels.SelectorFromSet(labels.Set{"env": "prod"}),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(prod)
	// Output:
	// [fleet/dev-eu-1 fleet/prod-eu-1]
	// [fleet/prod-eu-1]
}
