package localfleet_test

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
)

// A tool author's test starts a registry and three members, lets the tool reach them through the
// registry alone, and checks each member with its administrator's config. Stopping a member
// shows how the tool reports an outage.
func ExampleStart() {
	ctx := context.Background()
	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 3})
	if err != nil {
		panic(err)
	}
	defer lf.Stop()

	// The tool under test sees only the registry: lf.Registry.Kubeconfig for a command-line
	// tool, or lf.Registry.Config as here.
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
	})
	if err != nil {
		panic(err)
	}
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolver,
		multicluster.FleetOptions{Namespaces: []string{lf.Namespace}})
	if err := fleet.Start(ctx); err != nil {
		panic(err)
	}
	defer fleet.Stop()

	if err := lf.Member("member-2").Stop(); err != nil {
		panic(err)
	}
	results := multicluster.Map(ctx, fleet.Members(), func(ctx context.Context, m *multicluster.Member) (string, error) {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return "", err
		}
		v, err := kube.Discovery().ServerVersion()
		if err != nil {
			return "", err
		}
		return v.GitVersion, nil
	}, multicluster.NoRetry())
	for i, r := range results {
		fmt.Printf("%s (%s): %s failed=%t\n", r.Member, lf.Members[i].ProviderType, r.Value, r.Err != nil)
	}
	// Output:
	// fleet/member-1 (secret): v1.36.3 failed=false
	// fleet/member-2 (kubeconfig-secret):  failed=true
	// fleet/member-3 (secret): v1.36.3 failed=false
}
