package multicluster

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/memberclients"
)

// Member is one cluster of a Fleet. Its clients are built on first use, shared by every caller,
// and rebuilt only when the Resolver's answer for the Cluster changes (an edited endpoint, rotated
// credentials); a Member nobody uses costs no connection and no goroutine.
type Member struct {
	key      types.NamespacedName
	cluster  atomic.Pointer[v1alpha1.Cluster]
	resolver *access.Resolver
	scheme   *runtime.Scheme

	// current are the clients of the member's latest resolution; mu serializes replacing them.
	current atomic.Pointer[memberClients]
	mu      sync.Mutex
	// given are the clients NewMember was given; such a member resolves nothing.
	given *Clients
}

// memberClients are built on one Resolved, of one Cluster object; a new Resolved replaces them
// all.
type memberClients struct {
	cluster *v1alpha1.Cluster
	access  *access.Resolved
	set     *memberclients.Set
}

func newMember(c *v1alpha1.Cluster, resolver *access.Resolver, scheme *runtime.Scheme) *Member {
	m := &Member{key: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, resolver: resolver, scheme: scheme}
	m.cluster.Store(c)
	return m
}

// Name is the member's namespace/name in the registry.
func (m *Member) Name() types.NamespacedName { return m.key }

// String is the member's namespace/name.
func (m *Member) String() string { return m.key.String() }

// Cluster is the member's latest Cluster object from the registry. Treat it as read-only.
func (m *Member) Cluster() *v1alpha1.Cluster { return m.cluster.Load() }

func (m *Member) setCluster(c *v1alpha1.Cluster) { m.cluster.Store(c) }

// Access resolves the member's Cluster; see access.Resolver.Resolve. A member made by NewMember
// resolves to the Config it was given, or to an error if it was given none.
func (m *Member) Access(ctx context.Context) (*access.Resolved, error) {
	if m.given != nil {
		if m.given.Config == nil {
			return nil, fmt.Errorf("member %s: no rest.Config was given to NewMember", m.key)
		}
		return &access.Resolved{Config: m.given.Config}, nil
	}
	cur, err := m.resolved(ctx)
	if err != nil {
		return nil, err
	}
	return cur.access, nil
}

// resolved is the member's clients. While the member's Cluster object is the one they were
// resolved from and their resolution is current (access.Resolved.Current), they are returned as
// they are: a call on a member in a fan-out reads a few atomics rather than digesting the
// Cluster's spec and looking it up in the Resolver, which cost it more than any other of the
// SDK's own work (BenchmarkFanOut/paired's profile). Else the Resolver answers, and the clients
// are built again only when its answer is a new Resolved. A Cluster object is not changed once
// stored (a Fleet stores a new one for each change; MembersOf says so of its Clusters).
func (m *Member) resolved(ctx context.Context) (*memberClients, error) {
	c := m.Cluster()
	if cur := m.current.Load(); cur != nil && cur.cluster == c && cur.access.Current() {
		return cur, nil
	}
	a, err := m.resolver.Resolve(ctx, c)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.current.Load()
	switch {
	case cur == nil || cur.access != a:
		cur = &memberClients{cluster: c, access: a, set: memberclients.New(a.Config, a.HTTPClient, m.scheme)}
	case cur.cluster != c:
		cur = &memberClients{cluster: c, access: a, set: cur.set}
	default:
		return cur, nil
	}
	m.current.Store(cur)
	return cur, nil
}

// credentials identifies the member's resolution now (nil if it has none): it changes when its
// credentials do, so that a 401 is retried only after a rotation.
func (m *Member) credentials(ctx context.Context) *rest.Config {
	a, err := m.Access(ctx)
	if err != nil {
		return nil
	}
	return a.Config
}

// Config is the member's rest.Config, shared: copy it with rest.CopyConfig before changing it.
func (m *Member) Config(ctx context.Context) (*rest.Config, error) {
	a, err := m.Access(ctx)
	if err != nil {
		return nil, err
	}
	return a.Config, nil
}

// TransportConfig is a rest.Config for clients a caller builds once and keeps (a discovery client
// and REST mapper, Helm's actions): its host, paths and content types are the member's
// resolution's, and each request goes through Transport, so with the member's credentials, CA and
// pinning as they are when it is sent. Such a client keeps working across a rotation of the
// member's credentials, where one built on Config keeps the credentials of the resolution it was
// built on. Build it again when Config's Host changes (the Cluster's endpoint was edited): the
// member's transport refuses to send a request elsewhere.
func (m *Member) TransportConfig(ctx context.Context) (*rest.Config, error) {
	a, err := m.Access(ctx)
	if err != nil {
		return nil, err
	}
	if m.given != nil || a.HTTPClient == nil {
		return rest.CopyConfig(a.Config), nil
	}
	c := a.Config
	return &rest.Config{Host: c.Host, APIPath: c.APIPath, ContentConfig: c.ContentConfig, UserAgent: c.UserAgent,
		QPS: c.QPS, Burst: c.Burst, RateLimiter: c.RateLimiter, Timeout: c.Timeout, WarningHandler: c.WarningHandler,
		WarningHandlerWithContext: c.WarningHandlerWithContext, Transport: m.Transport()}, nil
}

// Kubernetes is a clientset for the member. It speaks protobuf, as Kubernetes' own controllers
// do: every built-in type has a protobuf form, which costs a fraction of JSON's CPU to decode, and
// a fan-out decodes one answer per member. Apply patches are sent as they are, and answers come in
// JSON from servers that prefer it.
func (m *Member) Kubernetes(ctx context.Context) (kubernetes.Interface, error) {
	return memberClient(m, ctx, m.givenClients().Kubernetes, (*memberclients.Set).Kubernetes)
}

// Dynamic is a dynamic client for the member.
func (m *Member) Dynamic(ctx context.Context) (dynamic.Interface, error) {
	return memberClient(m, ctx, m.givenClients().Dynamic, (*memberclients.Set).Dynamic)
}

// Client is a controller-runtime client for the member, with the Fleet's scheme (client-go's
// built-in types unless FleetOptions.Scheme says otherwise). It discovers the member's API
// lazily, on first use of each kind.
func (m *Member) Client(ctx context.Context) (client.Client, error) {
	return memberClient(m, ctx, m.givenClients().Client, (*memberclients.Set).Client)
}

// givenClients are the clients NewMember was given, or none.
func (m *Member) givenClients() Clients {
	if m.given == nil {
		return Clients{}
	}
	return *m.given
}

// memberClient returns a member's client of one kind: for a member made by NewMember, the one it
// was given; else the one of the clients built on the member's current resolution, which are
// built again when the resolution changes.
func memberClient[C comparable](m *Member, ctx context.Context, given C, get func(*memberclients.Set) (C, error)) (C, error) {
	var zero C
	if m.given != nil {
		if given != zero {
			return given, nil
		}
		// The type's name from reflect, not from %T of &zero: taking zero's address moved it to
		// the heap, an allocation on every call of every member (BenchmarkFanOut's profile).
		return zero, fmt.Errorf("member %s: no %s client was given to NewMember", m.key, reflect.TypeFor[C]())
	}
	cur, err := m.resolved(ctx)
	if err != nil {
		return zero, err
	}
	c, err := get(cur.set)
	if err != nil {
		return zero, fmt.Errorf("member %s: building a client: %w", m.key, err)
	}
	return c, nil
}

// endpoint is the member's server as its clients last resolved it, or else the first address its
// Cluster lists, for reports.
func (m *Member) endpoint() string {
	if cur := m.current.Load(); cur != nil {
		return cur.access.Endpoint()
	}
	if eps := m.Cluster().Spec.KubernetesAPIEndpoints.ServerEndpoints; len(eps) > 0 {
		return eps[0].ServerAddress
	}
	return ""
}

// defaultScheme is client-go's scheme: the built-in Kubernetes types.
var defaultScheme = clientgoscheme.Scheme
