package multicluster

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// A member keeps its clients while its Cluster object is the same and its resolution current,
// without asking the Resolver, and follows a new Cluster object at once: a Cluster that a Fleet
// replaces with one reaching another server is reached there by the next call, with no wait for
// the resolution's revalidation.
func TestMemberFollowsANewClusterObjectAtOnce(t *testing.T) {
	realservers.Required(t)
	sim := simmembers.Start(t, 2, 0)
	clusters := sim.Clusters("sim")
	resolver := simmembers.Resolver(t)
	m := MembersOf(resolver, clusters[:1], FleetOptions{})[0]
	ctx := context.Background()

	first, err := m.Kubernetes(ctx)
	require.NoError(t, err)
	resolver.Forget(clusters[0].Namespace, clusters[0].Name)
	require.Zero(t, resolver.Len())
	require.NoError(t, getConfigMap(ctx, m))
	again, err := m.Kubernetes(ctx)
	require.NoError(t, err)
	require.NotSame(t, first, again, "a forgotten resolution's clients were kept")
	require.Equal(t, 1, resolver.Len())
	for range 3 {
		kube, err := m.Kubernetes(ctx)
		require.NoError(t, err)
		require.Same(t, again, kube, "a current resolution's clients were rebuilt")
	}

	moved := clusters[1].DeepCopy()
	moved.Namespace, moved.Name, moved.UID = clusters[0].Namespace, clusters[0].Name, clusters[0].UID
	m.setCluster(moved)
	a, err := m.Access(ctx)
	require.NoError(t, err)
	require.Equal(t, clusters[1].Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress, a.Endpoint(),
		"a new Cluster object's endpoint was not used at once")
	kube, err := m.Kubernetes(ctx)
	require.NoError(t, err)
	require.NotSame(t, again, kube, "a new server's member kept the old server's clients")
	require.NoError(t, getConfigMap(ctx, m))
}
