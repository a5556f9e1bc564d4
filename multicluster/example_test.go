package multicluster_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// opsLogin lets Clusters use the ops-login plugin, whose credentials may go to the company's own
// API servers only.
var opsLogin = access.ExecPlugin{
	Command: "ops-login",
	SendTo: access.ServerFunc(func(_ *v1alpha1.Cluster, server *url.URL) bool {
		return strings.HasSuffix(server.Hostname(), ".example.com")
	}),
}

// exampleMembers are the members of three Clusters that people reach through an exec plugin.
// Nothing in the examples below connects to them.
func exampleMembers() []*multicluster.Member {
	resolver, err := access.NewResolver(access.ResolverOptions{ExecPlugins: []access.ExecPlugin{opsLogin}})
	if err != nil {
		panic(err)
	}
	return multicluster.MembersOf(resolver, exampleClusters(v1alpha1.ProviderTypeExec), multicluster.FleetOptions{})
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
	results := multicluster.Map(context.Background(), exampleMembers(),
		func(ctx context.Context, m *multicluster.Member) (string, error) {
			resolved, err := m.Access(ctx)
			if err != nil {
				return "", err
			}
			return resolved.Server.String(), nil
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
	results := multicluster.ForEach(context.Background(), exampleMembers(),
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

// A tool keeps its fan-out settings in an Options value, such as one filled from its flags, and
// adds per-call options after it; later options win.
func ExampleOptions() {
	settings := multicluster.Options{Concurrency: 50, Timeout: 30 * time.Second, SkipNotReady: true}
	done := 0
	results := multicluster.ForEach(context.Background(), exampleMembers(),
		func(ctx context.Context, m *multicluster.Member) error { return nil },
		settings, multicluster.Canary(1), multicluster.OnResult(func(multicluster.Outcome) { done++ }))
	fmt.Println(len(results.Succeeded()), "succeeded,", done, "reported")
	// Output: 3 succeeded, 3 reported
}
