package fleettest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// Unthrottled is config without client-side throttling (QPS -1): for a benchmark's bulk loads
// and for the controller it measures, so that any throttling seen is the registry's own.
func Unthrottled(config *rest.Config) *rest.Config {
	c := rest.CopyConfig(config)
	c.QPS, c.Burst = -1, 0
	return c
}

// CreateClusters creates the cluster set ns (unless it exists) and, 64 at a time, every Cluster
// of clusters in it, retrying what the registry says is transient; then, when not nil, is called
// with each created Cluster (to write its status, say). It is how the benchmarks fill a registry
// with thousands of Clusters.
func CreateClusters(tb testing.TB, config *rest.Config, ns string, clusters []v1alpha1.Cluster, then func(ctx context.Context, created *v1alpha1.Cluster) error) {
	tb.Helper()
	ctx := context.Background()
	bulk := Unthrottled(config)
	_, err := kubernetes.NewForConfigOrDie(bulk).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatal(err)
	}
	client := versioned.NewForConfigOrDie(bulk).ClusterregistryV1alpha1().Clusters(ns)
	items := make([]*multicluster.Member, len(clusters))
	for i := range clusters {
		c := clusters[i].DeepCopy()
		c.Namespace = ns
		items[i] = multicluster.NewMember(c, multicluster.Clients{})
	}
	err = multicluster.ForEach(ctx, items, func(ctx context.Context, m *multicluster.Member) error {
		created, err := client.Create(ctx, m.Cluster(), metav1.CreateOptions{})
		if err != nil || then == nil {
			return err
		}
		return then(ctx, created)
	}, multicluster.Concurrency(64), multicluster.RetryIf(multicluster.IsTransient)).Err()
	if err != nil {
		tb.Fatal(err)
	}
}
