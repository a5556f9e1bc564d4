package multicluster

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clientset/versioned/scheme"
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
//
// Its requests are not retried by client-go: a registry's API server that is starting answers
// 503 with Retry-After: 5, which client-go would sleep inside the one List call even once the
// server is ready a second later. The Fleet retries such answers itself (untilConnected), at its
// reconnection pace while the registry is coming back and as the server asks otherwise.
type registrySource struct{ registry versioned.Interface }

func (s registrySource) List(ctx context.Context, namespace string, opts metav1.ListOptions) (*v1alpha1.ClusterList, error) {
	rc, ok := s.restClient()
	if !ok {
		return s.registry.ClusterregistryV1alpha1().Clusters(namespace).List(ctx, opts)
	}
	list := &v1alpha1.ClusterList{}
	err := rc.Get().Namespace(namespace).Resource("clusters").
		VersionedParams(&opts, scheme.ParameterCodec).Timeout(requestTimeout(opts)).
		MaxRetries(0).Do(ctx).Into(list)
	return list, err
}

func (s registrySource) Watch(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	rc, ok := s.restClient()
	if !ok {
		return s.registry.ClusterregistryV1alpha1().Clusters(namespace).Watch(ctx, opts)
	}
	opts.Watch = true
	return rc.Get().Namespace(namespace).Resource("clusters").
		VersionedParams(&opts, scheme.ParameterCodec).Timeout(requestTimeout(opts)).
		MaxRetries(0).Watch(ctx)
}

// restClient is the clientset's REST client, if it has a real one (a fake clientset has none:
// its typed client is used as it is).
func (s registrySource) restClient() (*rest.RESTClient, bool) {
	rc, ok := s.registry.ClusterregistryV1alpha1().RESTClient().(*rest.RESTClient)
	return rc, ok && rc != nil
}

// requestTimeout is the request's timeout as the generated client sets it.
func requestTimeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}
