package shard_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	clusterclient "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// newSet is a cluster set of the registry for one test, and its Clusters; the test fails if it
// leaves a goroutine behind. It skips the test with -short.
func newSet(t *testing.T) (string, clusterclient.ClusterInterface) {
	t.Helper()
	realservers.Required(t)
	t.Cleanup(func() { goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...) })
	ns := fleettest.NewSet(t, lf)
	return ns, versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
}

// createCluster creates a Cluster of that name and labels, at a server no test reaches.
func createCluster(t *testing.T, clusters clusterclient.ClusterInterface, name string, labels map[string]string) *v1alpha1.Cluster {
	t.Helper()
	c, err := clusters.Create(t.Context(), &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://" + name + ".example:6443"}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return c
}

// newResolver resolves the registry's Clusters with its Secrets, read through kube.
func newResolver(t *testing.T, kube kubernetes.Interface) *access.Resolver {
	t.Helper()
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kube)})
	require.NoError(t, err)
	return resolver
}
