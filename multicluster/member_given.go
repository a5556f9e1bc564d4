package multicluster

import (
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Clients are the clients of a Member made by NewMember. Any may be nil; asking the Member for
// a client it was not given is an error.
type Clients struct {
	// Kubernetes is what Member.Kubernetes returns, such as client-go's fake.NewClientset().
	Kubernetes kubernetes.Interface
	// Dynamic is what Member.Dynamic returns, such as client-go's dynamic/fake clients.
	Dynamic dynamic.Interface
	// Client is what Member.Client returns, such as controller-runtime's fake.NewClientBuilder().Build().
	Client client.Client
	// Config is what Member.Config returns.
	Config *rest.Config
}

// NewMember returns a Member of cluster whose clients are given instead of resolved from the
// registry: for unit tests of a fan-out callback with fake clientsets, with no registry, no
// Resolver and no server, and for tools that already hold a member's clients. Its Cluster still
// matters to callbacks and to SkipNotReady.
func NewMember(cluster *v1alpha1.Cluster, clients Clients) *Member {
	m := newMember(cluster, nil, defaultScheme)
	m.given = &clients
	return m
}
