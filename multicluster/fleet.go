package multicluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/subscribe"
)

// FleetOptions chooses which Clusters of the registry make up a Fleet.
type FleetOptions struct {
	// Namespaces are the cluster sets to include; empty means all namespaces.
	Namespaces []string
	// Selector keeps only Clusters whose labels match; nil keeps all.
	Selector labels.Selector
	// Scheme is the scheme of members' controller-runtime clients; nil means client-go's.
	Scheme *runtime.Scheme
}

// Fleet is a live view of the registry's Clusters as Members: Start follows the registry, and
// members come and go with their Clusters. A Member's clients survive an edit that does not
// change how the member is reached. For a fixed set of Clusters, such as a file's, use MembersOf
// or LoadMembers instead. A Fleet is safe for concurrent use.
type Fleet struct {
	resolver *access.Resolver
	opts     FleetOptions
	source   ClusterSource

	mu      sync.RWMutex
	members map[types.NamespacedName]*Member
	// snapshot is Members' answer, built on the first call after membership changed.
	snapshot atomic.Pointer[[]*Member]
	subs     subscribe.List[MemberEvent]
	changes  subscribe.List[*Member]
	status   FleetStatus

	life    sync.Mutex // serialises Start and Stop
	running *following
}

// following is one Start's informers.
type following struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// NewFleet returns a Fleet that follows the registry's Clusters that match opts, resolving their
// credentials with resolver. Call Start to begin, Stop to end.
func NewFleet(registry versioned.Interface, resolver *access.Resolver, opts FleetOptions) *Fleet {
	if opts.Scheme == nil {
		opts.Scheme = defaultScheme
	}
	f := &Fleet{resolver: resolver, opts: opts, members: map[types.NamespacedName]*Member{}, status: FleetStatus{Since: time.Now()}}
	if registry != nil {
		f.source = registrySource{registry}
	}
	return f
}

// ErrFleetRunning is Start's error when the Fleet already follows the registry.
var ErrFleetRunning = errors.New("fleet: already started; call Stop first")

// Start begins following the registry and returns once the Fleet holds every matching Cluster.
// The Fleet follows the registry until Stop is called or ctx ends; Status says how current its
// view is meanwhile. After Stop, Start may be called again: the Fleet lists the registry anew,
// and members whose Clusters went meanwhile are removed. Start and Stop may be called from
// different goroutines; Stop during Start makes Start return an error.
func (f *Fleet) Start(ctx context.Context) error {
	f.life.Lock()
	if f.source == nil {
		f.life.Unlock()
		return errors.New("fleet: NewFleet was given no registry client")
	}
	if f.running != nil {
		f.life.Unlock()
		return ErrFleetRunning
	}
	run := &following{}
	ctx, run.cancel = context.WithCancel(ctx)
	f.running = run
	f.setStatus(FleetStatus{Since: time.Now()})
	namespaces := f.opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	var synced []cache.InformerSynced
	var stores []cache.Store
	for _, ns := range namespaces {
		informer := cache.NewSharedIndexInformer(f.listWatch(ns), &v1alpha1.Cluster{}, 0, cache.Indexers{})
		// Nothing here reads managed fields; dropping them keeps an idle member small.
		_ = informer.SetTransform(dropManagedFields)
		_ = informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			f.observe(err)
			cache.DefaultWatchErrorHandler(ctx, r, err)
		})
		reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { f.upsert(obj.(*v1alpha1.Cluster)) },
			UpdateFunc: func(_, obj any) { f.upsert(obj.(*v1alpha1.Cluster)) },
			DeleteFunc: f.onDelete,
		})
		if err != nil {
			run.cancel()
			f.running = nil
			f.life.Unlock()
			return err
		}
		// The handler's own sync, not the informer's: handlers run after the store is filled.
		synced = append(synced, reg.HasSynced)
		stores = append(stores, informer.GetStore())
		run.done.Go(func() { informer.RunWithContext(ctx) })
	}
	// A context that ends without Stop leaves a view nobody updates; say so.
	run.done.Go(func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.running == run {
			f.status = FleetStatus{Err: fmt.Errorf("fleet: stopped following the registry: %w", context.Cause(ctx)), Since: time.Now()}
		}
	})
	f.life.Unlock()

	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("fleet: the registry's Clusters did not sync: %w", context.Cause(ctx))
	}
	f.prune(stores)
	f.mu.Lock()
	if f.running == run {
		// Synced whether or not the registry answers now: the view holds every matching
		// Cluster as listed. A watch refused meanwhile (a new Cluster resource's watch cache
		// answers 429 "storage is (re)initializing" while lists are served from etcd) keeps the
		// view stale, not unsynced: it is Fresh once the watch is established.
		f.status.Synced = true
		if f.status.Err == nil {
			f.status.Since = time.Now()
		}
	}
	f.mu.Unlock()
	return nil
}

// Stop stops following the registry and waits for the Fleet's goroutines to end. Members keep
// working; their clients are not closed. Status reports the view as not synced until Start.
// Calling Stop when the Fleet is not running does nothing.
func (f *Fleet) Stop() {
	f.life.Lock()
	defer f.life.Unlock()
	run := f.running
	if run == nil {
		return
	}
	run.cancel()
	run.done.Wait()
	f.running = nil
	f.setStatus(FleetStatus{Since: time.Now()})
}

// Reselect makes selector the Fleet's Selector and follows the registry anew with it, returning
// once the Fleet holds every Cluster that matches, as Start does: members whose Clusters still
// match keep their Member (and its clients), those that no longer match are removed, and those
// that now match are added. A Fleet that was stopped is started. It is how a view that watches
// only some Clusters (package shard's, by bucket) changes what it watches without reconnecting
// to the members it keeps. It is Stop then Start, not one step: do not call Start or Stop from
// another goroutine meanwhile.
func (f *Fleet) Reselect(ctx context.Context, selector labels.Selector) error {
	f.Stop()
	f.life.Lock()
	// No goroutine of the Fleet runs between Stop and Start: none reads the options.
	f.opts.Selector = selector
	f.life.Unlock()
	return f.Start(ctx)
}

// listWatch lists and watches one namespace's Clusters, recording in the Fleet's status whether
// the registry answers.
//
// The informer starts from a list, not from a watch that streams the initial state: decoding one
// list costs the client about half of decoding an event per Cluster (BenchmarkFleet/sync).
//
// A registry that cannot be reached is retried here, every second at most, rather than by the
// informer: the informer backs off for up to 30 seconds after repeated failures, so after an
// outage the Fleet would stay stale for that long once the registry was back.
func (f *Fleet) listWatch(namespace string) cache.ListerWatcher {
	tweak := func(o metav1.ListOptions) metav1.ListOptions {
		if f.opts.Selector != nil {
			o.LabelSelector = f.opts.Selector.String()
		}
		return o
	}
	return listOnly{&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return untilConnected(ctx, f, func() (runtime.Object, error) { return f.source.List(ctx, namespace, tweak(o)) })
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return untilConnected(ctx, f, func() (watch.Interface, error) { return f.source.Watch(ctx, namespace, tweak(o)) })
		},
	}}
}

// listOnly makes the informer start from a list rather than stream the initial state in a watch.
type listOnly struct{ *cache.ListWatch }

func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// reconnectBackoff paces untilConnected: quick at first, then once a second.
var reconnectBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: time.Second}

// untilConnected calls fn until it returns anything but a lost connection to the registry or an
// answer that asks to come back later (503, 429), or ctx ends, recording each outcome in the
// Fleet's status.
//
// A registry that is starting again answers 503 with Retry-After: 5 for a second or two before
// it serves; waiting the full 5 s would keep the Fleet stale that long after the registry is
// back. So while the registry is coming back (a lost connection since the Fleet last reached
// it), such answers are retried at the reconnection pace; otherwise after the delay the server
// asks for, as client-go would.
func untilConnected[T any](ctx context.Context, f *Fleet, fn func() (T, error)) (T, error) {
	backoff := reconnectBackoff
	comingBack := connectionLost(f.Status().Err)
	for {
		v, err := fn()
		f.observe(err)
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		delay := backoff.Step()
		switch {
		case connectionLost(err):
			comingBack = true
		case askedToWait(err):
			if s, ok := apierrors.SuggestsClientDelay(err); ok && !comingBack {
				delay = max(delay, time.Duration(s)*time.Second)
			}
		default:
			return v, err
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return v, err
		}
	}
}

// askedToWait reports whether err is the registry's answer that it cannot serve now: 503 (a
// server starting, or a storage not ready) or 429 (throttled).
func askedToWait(err error) bool {
	return apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err)
}

// connectionLost reports whether err means the registry could not be reached or went away.
func connectionLost(err error) bool {
	return notConnected(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsHTTP2ConnectionLost(err) || errors.Is(err, syscall.ECONNRESET)
}

// dropManagedFields is the informers' transform.
func dropManagedFields(obj any) (any, error) {
	if c, ok := obj.(*v1alpha1.Cluster); ok {
		c.ManagedFields = nil
	}
	return obj, nil
}

// prune removes the members whose Clusters are in none of the stores: those deleted while the
// Fleet was stopped.
func (f *Fleet) prune(stores []cache.Store) {
	present := map[string]bool{}
	for _, s := range stores {
		for _, key := range s.ListKeys() {
			present[key] = true
		}
	}
	f.mu.RLock()
	var gone []types.NamespacedName
	for key := range f.members {
		if !present[key.String()] {
			gone = append(gone, key)
		}
	}
	f.mu.RUnlock()
	for _, key := range gone {
		f.remove(key)
	}
}

// Members returns the Fleet's members, ordered by namespace and name. The slice is shared by
// every caller until membership changes, so that asking costs nothing: do not modify it (copy it
// with slices.Clone first).
func (f *Fleet) Members() []*Member {
	if p := f.snapshot.Load(); p != nil {
		return *p
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p := f.snapshot.Load(); p != nil {
		return *p
	}
	out := make([]*Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	sortMembers(out)
	out = slices.Clip(out)
	// Writers hold the write lock, so membership cannot have changed since the map was read.
	f.snapshot.Store(&out)
	return out
}

// Select returns the members whose Cluster labels match selector, ordered as Members, in a new
// slice.
func (f *Fleet) Select(selector labels.Selector) []*Member {
	var out []*Member
	for _, m := range f.Members() {
		if selector.Matches(labels.Set(m.Cluster().Labels)) {
			out = append(out, m)
		}
	}
	return out
}

// Member returns the member of that namespace and name, or nil.
func (f *Fleet) Member(namespace, name string) *Member {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.members[types.NamespacedName{Namespace: namespace, Name: name}]
}

// Len is the number of members.
func (f *Fleet) Len() int {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return len(f.members)
}

// matches reports whether c is one of the Clusters the options choose.
func (o *FleetOptions) matches(c *v1alpha1.Cluster) bool {
	if len(o.Namespaces) > 0 && !slices.Contains(o.Namespaces, c.Namespace) {
		return false
	}
	return o.Selector == nil || o.Selector.Matches(labels.Set(c.Labels))
}

func (f *Fleet) upsert(c *v1alpha1.Cluster) {
	key := types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
	if !f.opts.matches(c) {
		f.remove(key)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.members[key]; ok {
		old := m.Cluster()
		m.setCluster(c)
		if access.ReachDigest(&old.Spec) != access.ReachDigest(&c.Spec) {
			f.publish(MemberEvent{Type: MemberReachChanged, Member: m})
		}
		if old.ResourceVersion != c.ResourceVersion {
			f.changes.Send(m)
		}
		return
	}
	m := newMember(c, f.resolver, f.opts.Scheme)
	f.members[key] = m
	f.snapshot.Store(nil)
	f.publish(MemberEvent{Type: MemberAdded, Member: m})
}

func (f *Fleet) onDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if c, ok := obj.(*v1alpha1.Cluster); ok {
		f.remove(types.NamespacedName{Namespace: c.Namespace, Name: c.Name})
	}
}

func (f *Fleet) remove(key types.NamespacedName) {
	f.mu.Lock()
	m, had := f.members[key]
	if had {
		delete(f.members, key)
		f.snapshot.Store(nil)
		f.publish(MemberEvent{Type: MemberRemoved, Member: m})
	}
	f.mu.Unlock()
	if had && f.resolver != nil {
		f.resolver.Forget(key.Namespace, key.Name)
	}
}

func sortMembers(ms []*Member) {
	slices.SortFunc(ms, func(a, b *Member) int {
		return cmp.Or(cmp.Compare(a.key.Namespace, b.key.Namespace), cmp.Compare(a.key.Name, b.key.Name))
	})
}
