package multicluster

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// ClusterSource is where a Fleet's Clusters come from: the registry (NewFleet), or another
// inventory whose entries are made into Clusters, such as SIG Multicluster's ClusterProfiles
// (package clusterprofile). Its List and Watch behave as a clientset's for one namespace
// (metav1.NamespaceAll for every one): resource versions, label selectors and watch events alike.
type ClusterSource interface {
	List(ctx context.Context, namespace string, opts metav1.ListOptions) (*v1alpha1.ClusterList, error)
	Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
}

// NewFleetFrom returns a Fleet that follows the Clusters of source that match opts, resolving
// their credentials with resolver: every trust rule of the Resolver applies to them as to the
// registry's. Call Start to begin, Stop to end.
func NewFleetFrom(source ClusterSource, resolver *access.Resolver, opts FleetOptions) *Fleet {
	f := NewFleet(nil, resolver, opts)
	f.source = source
	return f
}

// registrySource is the registry's Clusters, as NewFleet follows them.
type registrySource struct{ registry versioned.Interface }

func (s registrySource) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*v1alpha1.ClusterList, error) {
	return s.registry.ClusterregistryV1alpha1().Clusters(namespace).List(ctx, opts)
}

func (s registrySource) Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	return s.registry.ClusterregistryV1alpha1().Clusters(namespace).Watch(ctx, opts)
}
