package mcprovider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/cluster-registry/sdk/internal/inlineinformer"
	"github.com/cluster-registry/sdk/internal/intern"
	"github.com/cluster-registry/sdk/multicluster"
)

// Members is what a Provider follows: a *multicluster.Fleet, or any source of members with the
// same two methods.
type Members interface {
	Members() []*multicluster.Member
	Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func())
}

// Options configure a Provider. The zero value is ready to use.
type Options struct {
	// ClusterOptions adjust each member's cluster.Cluster: its scheme, cache and client options.
	// They are applied in order, after the Provider's defaults (caches drop managed fields, as
	// cache.TransformStripManagedFields does: a controller reads objects, and the server keeps
	// field ownership; set Cache.DefaultTransform to keep them. Informers call their handlers in
	// line, as each change is stored, and start from a list rather than a watch streaming the
	// initial state: a handler that does more than enqueue delays its cluster's cache; set
	// Cache.NewInformer to toolscache.NewSharedIndexInformer for client-go's own), and then the
	// member's own HTTP
	// client is set, overriding any an option set: that client is what pins every request to the
	// member and keeps its credentials current.
	ClusterOptions []cluster.Option
	// Logger hears why a member could not be engaged (it is retried, with backoff, while it stays
	// in the Fleet). By default, controller-runtime's logger named "mcprovider".
	Logger logr.Logger
	// WarmKinds are the kinds the controllers watch (such as &corev1.ConfigMap{}): each member's
	// caches of them are started and synced before it is engaged. multicluster-runtime v0.24.1
	// engages one cluster at a time per controller and, holding its lock, waits for the cluster's
	// caches of the kinds watched; warmed, they are ready, so engaging many members takes about
	// the time of the slowest rather than the sum, and a member whose caches do not sync within
	// WarmTimeout is retried by the Provider instead of holding back every other member.
	WarmKinds []client.Object
	// WarmTimeout bounds the wait for a member's WarmKinds to sync; 30 seconds when zero.
	WarmTimeout time.Duration
}

// Provider is a multicluster-runtime Provider, and ProviderRunnable, over a Fleet: the
// multicluster manager starts it, and it engages each member of the Fleet, current and future,
// as a controller-runtime cluster.Cluster named ClusterName(member). Make one with New.
type Provider struct {
	members Members
	opts    Options
	log     logr.Logger

	mu       sync.Mutex
	started  bool
	indexed  map[mcmulticluster.ClusterName]cluster.Cluster // built, with every index: IndexField reaches them
	engaged  map[mcmulticluster.ClusterName]cluster.Cluster // being engaged or engaged: Get returns them
	runs     map[types.NamespacedName]*engagement
	indexers []index
	wg       sync.WaitGroup
}

var (
	_ mcmulticluster.Provider         = (*Provider)(nil)
	_ mcmulticluster.ProviderRunnable = (*Provider)(nil)
)

// engagement is one member's life in the Provider, from when it appeared (or was last reached
// differently) until it leaves.
type engagement struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// index is a field index that IndexField asked for, applied to every cluster engaged.
type index struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

// New returns a Provider of members' clusters. Give it to multicluster-runtime's manager
// (mcmanager.New(config, provider, options)), which starts it.
func New(members Members, opts Options) *Provider {
	log := opts.Logger
	if log.GetSink() == nil {
		log = logf.Log.WithName("mcprovider")
	}
	return &Provider{
		members: members,
		opts:    opts,
		log:     log,
		indexed: map[mcmulticluster.ClusterName]cluster.Cluster{},
		engaged: map[mcmulticluster.ClusterName]cluster.Cluster{},
		runs:    map[types.NamespacedName]*engagement{},
	}
}

// Start engages every member of the Fleet with aware (the multicluster manager), and each member
// that joins later; disengages members that leave; and engages a member anew when how it is
// reached changes. It blocks until ctx is done, then disengages every member and returns once
// their clusters have stopped. A member that cannot be engaged (its credentials cannot be had
// yet, say) is retried with backoff and never holds back the others.
func (p *Provider) Start(ctx context.Context, aware mcmulticluster.Aware) error {
	if aware == nil {
		return errors.New("mcprovider: Start needs a multicluster.Aware to engage clusters with, such as the multicluster manager")
	}
	p.mu.Lock()
	if p.started {
		p.mu.Unlock()
		return errors.New("mcprovider: the Provider was already started")
	}
	p.started = true
	p.mu.Unlock()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	unsubscribe := p.members.Subscribe(func(ev multicluster.MemberEvent) { p.onMemberEvent(ctx, aware, ev) })
	<-ctx.Done()
	unsubscribe()
	p.mu.Lock()
	for _, e := range p.runs {
		e.cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// onMemberEvent starts, restarts or stops the member's engagement. A restart waits for the old
// cluster to stop before the new one is built, so the member is engaged once at a time.
func (p *Provider) onMemberEvent(ctx context.Context, aware mcmulticluster.Aware, ev multicluster.MemberEvent) {
	key := ev.Member.Name()
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Err() != nil {
		return // stopping: Start cancels what runs and waits for it
	}
	prev := p.runs[key]
	if prev != nil {
		prev.cancel()
		delete(p.runs, key)
	}
	if ev.Type == multicluster.MemberRemoved {
		return
	}
	memberCtx, cancel := context.WithCancel(ctx)
	e := &engagement{cancel: cancel, done: make(chan struct{})}
	p.runs[key] = e
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(e.done)
		if prev != nil {
			<-prev.done
		}
		p.engage(memberCtx, aware, ev.Member)
	}()
}

// engageBackoff paces attempts to engage a member that failed.
var engageBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 30 * time.Second}

// engage keeps the member engaged until ctx is done.
func (p *Provider) engage(ctx context.Context, aware mcmulticluster.Aware, m *multicluster.Member) {
	name := ClusterName(m.Name())
	backoff := engageBackoff
	for {
		engaged, err := p.engageOnce(ctx, aware, m, name)
		if ctx.Err() != nil {
			return
		}
		if engaged {
			backoff = engageBackoff
		}
		wait := backoff.Step()
		p.log.Error(err, "could not keep a member engaged; retrying", "cluster", name, "retryIn", wait.Round(time.Millisecond).String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// engageOnce builds the member's cluster, applies the indexes, then runs the cluster, engaged,
// until ctx is done (it returns with the cluster stopped) or the cluster fails. engaged says
// whether it got as far as engaging. The cluster runs on this goroutine: an engaged member costs
// the Provider no goroutine of its own.
func (p *Provider) engageOnce(ctx context.Context, aware mcmulticluster.Aware, m *multicluster.Member, name mcmulticluster.ClusterName) (engaged bool, err error) {
	cl, err := p.newCluster(ctx, m)
	if err != nil {
		return false, err
	}
	// Indexes go on before the cache starts, as controller-runtime's own providers add them.
	if err := p.register(ctx, name, cl); err != nil {
		p.forget(name, cl)
		return false, err
	}
	clusterCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	engageErr := make(chan error, 1)
	go func() {
		// multicluster-runtime's controllers engage one cluster at a time, each under a lock held
		// while the cluster's RESTMapper asks the member about the kinds watched. Asking here
		// first, outside that lock, connects to the member and learns its core API: a member that
		// does not answer is retried by this Provider rather than holding back every other
		// member's engagement, and the others' engagements make no request under the lock.
		if _, err := cl.GetRESTMapper().RESTMapping(schema.GroupKind{Kind: "Namespace"}, "v1"); err != nil {
			cancel()
			engageErr <- fmt.Errorf("discovering cluster %s: %w", name, err)
			return
		}
		if err := p.warm(clusterCtx, cl); err != nil {
			cancel()
			engageErr <- fmt.Errorf("cluster %s: %w", name, err)
			return
		}
		p.mu.Lock()
		p.engaged[name] = cl // reconcilers may Get it as soon as it is engaged
		p.mu.Unlock()
		err := aware.Engage(clusterCtx, name, cl)
		if err != nil {
			cancel() // stops the cluster
			err = fmt.Errorf("engaging cluster %s: %w", name, err)
		}
		engageErr <- err
	}()
	startErr := cl.Start(clusterCtx)
	cancel()
	err = <-engageErr
	p.forget(name, cl)
	if err != nil {
		return false, err
	}
	if ctx.Err() != nil {
		return true, nil
	}
	if startErr == nil {
		startErr = errors.New("it stopped")
	}
	return true, fmt.Errorf("cluster %s: %w", name, startErr)
}

// warm starts the cluster's caches of Options.WarmKinds and waits, within WarmTimeout, for them
// to sync.
func (p *Provider) warm(ctx context.Context, cl cluster.Cluster) error {
	if len(p.opts.WarmKinds) == 0 {
		return nil
	}
	timeout := p.opts.WarmTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, obj := range p.opts.WarmKinds {
		if _, err := cl.GetCache().GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("its cache of %T did not sync within %s: %w", obj, timeout, err)
		}
	}
	return nil
}

// clusterDefaults are the Provider's default cluster options. Managed fields are most of what a
// cached object holds that no controller reads (two entries of an applied, then updated,
// ConfigMap are larger than its metadata), so the caches drop them, and share the short strings of
// metadata that repeat across objects and clusters (package intern). Each informer calls its
// handlers in line and starts from a list (package inlineinformer): a controller's handler only
// enqueues, so the 16 KiB queue client-go keeps per handler and member buys nothing, and a list
// costs less to decode than the same objects streamed as watch events.
func clusterDefaults(o *cluster.Options) {
	if o.Cache.DefaultTransform == nil {
		strip := crcache.TransformStripManagedFields()
		o.Cache.DefaultTransform = func(obj any) (any, error) {
			obj, err := strip(obj)
			if err == nil {
				intern.Meta(obj)
			}
			return obj, err
		}
	}
	if o.Cache.NewInformer == nil {
		o.Cache.NewInformer = inlineinformer.NewShared
	}
}

// newCluster builds the member's cluster on its resolved config, with an HTTP client that sends
// each request with the member's current resolution.
func (p *Provider) newCluster(ctx context.Context, m *multicluster.Member) (cluster.Cluster, error) {
	cfg, err := m.Config(ctx)
	if err != nil {
		return nil, err
	}
	httpClient := &http.Client{Transport: m.Transport()}
	opts := append([]cluster.Option{clusterDefaults}, p.opts.ClusterOptions...)
	opts = append(opts, func(o *cluster.Options) { o.HTTPClient = httpClient })
	cl, err := cluster.New(rest.CopyConfig(cfg), opts...)
	if err != nil {
		return nil, fmt.Errorf("member %s: building its cluster: %w", m, err)
	}
	return cl, nil
}

// register applies every index asked for so far to cl, then makes it one that IndexField
// reaches. An index asked for meanwhile is applied too, before cl is registered, so each index
// reaches each cluster exactly once.
func (p *Provider) register(ctx context.Context, name mcmulticluster.ClusterName, cl cluster.Cluster) error {
	applied := 0
	for {
		p.mu.Lock()
		pending := slices.Clone(p.indexers[applied:])
		if len(pending) == 0 {
			p.indexed[name] = cl
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
		for _, ix := range pending {
			if err := cl.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
				return fmt.Errorf("cluster %s: indexing %T by %q: %w", name, ix.obj, ix.field, err)
			}
		}
		applied += len(pending)
	}
}

// forget stops Get returning cl for name, and IndexField reaching it.
func (p *Provider) forget(name mcmulticluster.ClusterName, cl cluster.Cluster) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.engaged[name] == cl {
		delete(p.engaged, name)
	}
	if p.indexed[name] == cl {
		delete(p.indexed, name)
	}
}

// Get returns the engaged cluster of the member that name names (see ClusterName), or an error
// that wraps multicluster-runtime's ErrClusterNotFound.
func (p *Provider) Get(_ context.Context, name mcmulticluster.ClusterName) (cluster.Cluster, error) {
	p.mu.Lock()
	cl, ok := p.engaged[name]
	p.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("cluster %s: %w", name, mcmulticluster.ErrClusterNotFound)
	}
	return cl, nil
}

// ClusterNames are the names of the engaged clusters, sorted.
func (p *Provider) ClusterNames() []mcmulticluster.ClusterName {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Sorted(maps.Keys(p.engaged))
}

// IndexField indexes obj by field on every engaged cluster, and on every cluster engaged later.
// The error names each cluster whose cache refused the index.
func (p *Provider) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	p.mu.Lock()
	p.indexers = append(p.indexers, index{obj: obj, field: field, extract: extract})
	clusters := maps.Clone(p.indexed)
	p.mu.Unlock()
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(clusters)) {
		if err := clusters[name].GetFieldIndexer().IndexField(ctx, obj, field, extract); err != nil {
			errs = append(errs, fmt.Errorf("cluster %s: indexing %T by %q: %w", name, obj, field, err))
		}
	}
	return errors.Join(errs...)
}
