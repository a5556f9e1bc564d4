package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	cpinformers "sigs.k8s.io/cluster-inventory-api/client/informers/externalversions"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/fleetcache"
	informers "github.com/cluster-registry/sdk/informers/externalversions"
	"github.com/cluster-registry/sdk/multicluster"
)

// Finalizer is on every Release the Controller has delivered, so that deleting it removes its
// objects from the members first (DeletionPolicy Delete).
const Finalizer = "clusterregistry.k8s.io/release"

// ControllerOptions configure a Controller.
type ControllerOptions struct {
	// Namespace is the cluster set whose Releases are delivered; every one when empty.
	Namespace string
	// FieldManager prefixes each Release's field manager on members: PREFIX/NAMESPACE/NAME.
	// Default "clusterregistry-release".
	FieldManager string
	// Workers is how many Releases are worked on at once; 4 when zero.
	Workers int
	// MemberConcurrency is how many members one Release applies to at once; 32 when zero.
	MemberConcurrency int
	// MemberTimeout bounds the work on one member in one turn (an unreachable member costs only
	// this); 30 s when zero.
	MemberTimeout time.Duration
	// RetryAfter is how long a failed member waits before it is tried again; 30 s when zero.
	RetryAfter time.Duration
	// Recheck is how often each Release's applied objects are compared again with the members'
	// watch caches, as if just seen, so that what a watch missed is corrected or reported within
	// it; DefaultRecheck when zero. It reads only the caches.
	Recheck time.Duration
	// Fresh, if set, says whether the members are the registry's as they are now (for a Fleet,
	// func() bool { return fleet.Status().Fresh() }): while it is false, nothing is removed from
	// any member.
	Fresh func() bool
	// Sharding, if set, divides the members between the replicas of a group: this one applies
	// to the members it owns only (members should be its shard's view). See Sharding.
	Sharding *Sharding
	// Lease, if set, is a Lease in the registry that the Controller must hold to act: two
	// Controllers of one cluster set that are not sharded (a second process started by hand
	// beside a Deployment's) take turns, the second waiting, rather than both apply its Releases
	// and write their status. Name defaults to DefaultLeaseName, Namespace to Namespace; the rest
	// as election.Lease.Defaulted. Not with Sharding, whose replicas divide the work instead.
	Lease *election.Lease
	// Charts fetches the charts Releases name in repositories (spec.source.chart.repository);
	// nil is one of the process's with chartrepo's defaults: TLS verified by the system's roots,
	// plain HTTP refused. Share one between Controllers so that a chart is downloaded once.
	Charts *chartrepo.Fetcher
	// Logger hears what the Controller does; discarded when unset.
	Logger logr.Logger
}

// Controller delivers the Releases of a registry to the members of their decisions. Make one with
// NewController and Run it.
type Controller struct {
	members   multicluster.MemberSource
	registry  versioned.Interface
	kube      kubernetes.Interface
	decisions cpversioned.Interface
	opts      ControllerOptions
	log       logr.Logger
	queue     workqueue.TypedRateLimitingInterface[types.NamespacedName]
	clients   clientsCache
	// replica labels this replica's status slices (replicaHash); "" when not sharded.
	replica string

	// watched are the members any Release has objects on: the watch caches' members.
	watched *multicluster.Subset
	// deaf drops the members' watch events: a test's watch that missed them (export_test.go).
	deaf  atomic.Bool
	keep  atomic.Pointer[map[types.NamespacedName]bool]
	cache *fleetcache.Cache

	releaseLister  cache.GenericLister
	sliceLister    cache.GenericLister
	decisionLister cache.GenericLister
	configMaps     cache.GenericLister
	revisions      cache.GenericLister
	// decisionsSynced says whether the PlacementDecisions are listed; decisionsErr is why not.
	decisionsSynced cache.InformerSynced
	decisionsErr    atomic.Pointer[error]
	src             *sources
	informersRun    []func(<-chan struct{})
	synced          []cache.InformerSynced

	mu       sync.Mutex
	releases map[types.NamespacedName]*releaseState
	kinds    map[schema.GroupVersionResource]*fleetcache.Kind[*unstructured.Unstructured]
	writes   atomic.Int64
	recorder atomic.Pointer[record.EventRecorder]
	// helmApplies counts Helm-mode applies, made or found unchanged: the tests' way to know that
	// a pass reached every member.
	helmApplies atomic.Int64
}

// NewController makes a Controller of the Releases of the registry, delivered to members of
// members (a Fleet). kube reads the ConfigMaps sources name; decisions reads PlacementDecisions.
func NewController(members multicluster.MemberSource, registry versioned.Interface, kube kubernetes.Interface, decisions cpversioned.Interface, opts ControllerOptions) (*Controller, error) {
	if members == nil || registry == nil || kube == nil || decisions == nil {
		return nil, errors.New("delivery: members and the registry's clients are required")
	}
	if opts.FieldManager == "" {
		opts.FieldManager = "clusterregistry-release"
	}
	opts.Workers = max(opts.Workers, 0)
	if opts.Workers == 0 {
		opts.Workers = 4
	}
	if opts.MemberConcurrency <= 0 {
		opts.MemberConcurrency = 32
	}
	if opts.MemberTimeout <= 0 {
		opts.MemberTimeout = 30 * time.Second
	}
	if opts.Recheck <= 0 {
		opts.Recheck = DefaultRecheck
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 30 * time.Second
	}
	if opts.Charts == nil {
		opts.Charts = defaultCharts()
	}
	if s := opts.Sharding; s != nil && (s.Replica == "" || s.Owner == nil || s.Live == nil) {
		return nil, errors.New("delivery: ControllerOptions.Sharding needs Replica, Owner and Live")
	}
	if opts.Lease != nil {
		var err error
		if opts.Lease, err = defaultedLease(opts); err != nil {
			return nil, err
		}
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	c := &Controller{
		members: members, registry: registry, kube: kube, decisions: decisions, opts: opts, log: log,
		queue:    workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName](), workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "releases"}),
		watched:  multicluster.NewSubset(),
		releases: map[types.NamespacedName]*releaseState{},
		kinds:    map[schema.GroupVersionResource]*fleetcache.Kind[*unstructured.Unstructured]{},
	}
	if opts.Sharding != nil {
		c.replica = replicaHash(opts.Sharding.Replica)
	}
	c.keep.Store(&map[types.NamespacedName]bool{})
	c.cache = fleetcache.New(c.watched)

	if err := c.informers(); err != nil {
		return nil, err
	}
	return c, nil
}

// informers makes the registry's informers the Controller reads, and their handlers.
func (c *Controller) informers() error {
	reg := informers.NewSharedInformerFactoryWithOptions(c.registry, 0, informers.WithNamespace(c.opts.Namespace))
	rel := reg.Clusterregistry().V1alpha1().Releases()
	sl := reg.Clusterregistry().V1alpha1().ReleaseStatusSlices()
	dec := cpinformers.NewSharedInformerFactoryWithOptions(c.decisions, 0, cpinformers.WithNamespace(c.opts.Namespace)).Apis().V1alpha1().PlacementDecisions()
	cms := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0, kubeinformers.WithNamespace(c.opts.Namespace)).Core().V1().ConfigMaps()
	// The Releases' histories only (see History): their revisions, no other ControllerRevision.
	crs := kubeinformers.NewSharedInformerFactoryWithOptions(c.kube, 0, kubeinformers.WithNamespace(c.opts.Namespace),
		kubeinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = v1alpha1.ReleaseLabel })).Apps().V1().ControllerRevisions()
	enqueue := func(obj any) {
		if m, err := metaOf(obj); err == nil {
			c.queue.Add(types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetName()})
		}
	}
	handlers := []struct {
		inf cache.SharedIndexInformer
		fn  func(obj any)
	}{
		{rel.Informer(), func(obj any) { enqueue(obj); c.enqueueDependents(obj) }},
		{dec.Informer(), func(obj any) { c.enqueueFor(obj, c.releasesOfDecision) }},
		{cms.Informer(), func(obj any) { c.enqueueFor(obj, c.releasesOfConfigMap) }},
		// Another replica's report (sharded) moves the waves, the Release's status and the
		// handing over of members; this replica's own writes call for nothing.
		{sl.Informer(), func(obj any) {
			if m, err := metaOf(obj); err == nil && m.GetLabels()[v1alpha1.ReplicaLabel] != c.replica && m.GetLabels()[v1alpha1.ReleaseLabel] != "" {
				c.queue.Add(types.NamespacedName{Namespace: m.GetNamespace(), Name: m.GetLabels()[v1alpha1.ReleaseLabel]})
			}
		}},
	}
	for _, h := range handlers {
		fn := h.fn
		if _, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: fn, UpdateFunc: func(_, obj any) { fn(obj) },
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				fn(obj)
			},
		}); err != nil {
			return err
		}
	}
	for _, inf := range []cache.SharedIndexInformer{rel.Informer(), sl.Informer(), dec.Informer(), cms.Informer(), crs.Informer()} {
		c.informersRun = append(c.informersRun, inf.Run)
		if inf != dec.Informer() {
			c.synced = append(c.synced, inf.HasSynced)
		}
	}
	// The decisions are waited for apart: a controller that cannot read them (no
	// PlacementDecision CRD, a role without them) still says so on every Release, rather than
	// wait for them and leave each Release's last Available standing.
	c.decisionsSynced = dec.Informer().HasSynced
	if err := dec.Informer().SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		c.decisionsErr.Store(&err)
	}); err != nil {
		return err
	}
	c.releaseLister = cache.NewGenericLister(rel.Informer().GetIndexer(), v1alpha1.Resource("releases"))
	c.sliceLister = cache.NewGenericLister(sl.Informer().GetIndexer(), v1alpha1.Resource("releasestatusslices"))
	c.decisionLister = cache.NewGenericLister(dec.Informer().GetIndexer(), cpv1alpha1.SchemeGroupVersion.WithResource("placementdecisions").GroupResource())
	c.configMaps = cache.NewGenericLister(cms.Informer().GetIndexer(), corev1.Resource("configmaps"))
	c.revisions = cache.NewGenericLister(crs.Informer().GetIndexer(), appsv1.Resource("controllerrevisions"))
	c.src = &sources{kube: c.kube, charts: c.opts.Charts, configMap: func(_ context.Context, namespace, name string) (*corev1.ConfigMap, error) {
		o, err := c.configMaps.ByNamespace(namespace).Get(name)
		if err != nil {
			return nil, err
		}
		return o.(*corev1.ConfigMap), nil
	}}
	return nil
}

// Writes is how many writes the Controller made to the registry and to members since it started:
// applies, deletes, status and slice writes. At steady state it does not grow.
func (c *Controller) Writes() int64 { return c.writes.Load() }

// Run delivers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if l := c.opts.Lease; l != nil {
		c.log.Info("acting only while holding the Lease: another releases controller of the set that holds it is waited for",
			"lease", l.Namespace+"/"+l.Name, "identity", l.Identity)
		err := election.Run(ctx, c.kube.CoordinationV1(), *l, c.log, c.run)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	return c.run(ctx)
}

// decisionsGrace is how long Run waits for the PlacementDecisions to be listed before it works
// on Releases without them (saying so in their status).
const decisionsGrace = 10 * time.Second

// decisionsUnavailableError: the controller cannot read the registry's PlacementDecisions.
type decisionsUnavailableError struct{ reason string }

func (e *decisionsUnavailableError) Error() string {
	return "the releases controller cannot read the registry's PlacementDecisions (" + e.reason +
		"): does its role allow listing and watching placementdecisions.multicluster.x-k8s.io, and is their CRD installed?"
}

// DefaultLeaseName is the name of ControllerOptions.Lease when it names none.
const DefaultLeaseName = "clusterregistry-releases"

// defaultedLease is opts.Lease with its defaults, checked.
func defaultedLease(opts ControllerOptions) (*election.Lease, error) {
	if opts.Sharding != nil {
		return nil, errors.New("delivery: ControllerOptions.Lease and Sharding exclude each other: sharded replicas divide the work")
	}
	lease := opts.Lease.Defaulted()
	lease.Name, lease.Namespace = cmp.Or(lease.Name, DefaultLeaseName), cmp.Or(lease.Namespace, opts.Namespace)
	if err := lease.Validate(); err != nil {
		return nil, fmt.Errorf("delivery: ControllerOptions.Lease: %w", err)
	}
	return &lease, nil
}

func (c *Controller) run(ctx context.Context) error {
	defer c.queue.ShutDown()
	stopWatched := c.watched.Follow(c.members)
	defer stopWatched()
	c.watched.Keep(func(k types.NamespacedName) bool { return (*c.keep.Load())[k] })
	if err := c.cache.Start(ctx); err != nil {
		return err
	}
	defer c.cache.Stop()
	stopEvents, err := c.recordEvents(ctx)
	if err != nil {
		return err
	}
	defer stopEvents()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, run := range c.informersRun {
		wg.Go(func() { run(ctx.Done()) })
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return nil // ctx ended
	}
	// A while for the decisions, which sync within a second where they can be read.
	waitCtx, cancelWait := context.WithTimeout(ctx, decisionsGrace)
	cache.WaitForCacheSync(waitCtx.Done(), c.decisionsSynced)
	cancelWait()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	if c.opts.Sharding != nil {
		// Members that move to or from this replica move every Release's work.
		unsubscribe := c.members.Subscribe(func(ev multicluster.MemberEvent) {
			if ev.Type == multicluster.MemberAdded || ev.Type == multicluster.MemberRemoved {
				for _, k := range c.releasesWhere(ev.Member.Name().Namespace, func(*v1alpha1.Release) bool { return true }) {
					c.queue.Add(k)
				}
			}
		})
		defer unsubscribe()
	}
	for range c.opts.Workers {
		wg.Go(func() {
			for c.work(ctx) {
			}
		})
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) work(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	after, err := c.reconcile(ctx, key)
	switch {
	case err != nil:
		if ctx.Err() == nil && !apierrors.IsConflict(err) {
			c.log.Error(err, "release not reconciled; retrying", "release", key)
		}
		c.queue.AddRateLimited(key)
	default:
		c.queue.Forget(key)
		if after > 0 {
			c.queue.AddAfter(key, after)
		}
	}
	return true
}

// enqueueFor enqueues the Releases that of finds for a changed object.
func (c *Controller) enqueueFor(obj any, of func(namespace, name string, labels map[string]string) []types.NamespacedName) {
	m, err := metaOf(obj)
	if err != nil {
		return
	}
	for _, k := range of(m.GetNamespace(), m.GetName(), m.GetLabels()) {
		c.queue.Add(k)
	}
}

func (c *Controller) releasesOfDecision(namespace, _ string, l map[string]string) []types.NamespacedName {
	key := l[cpv1alpha1.DecisionKeyLabel]
	return c.releasesWhere(namespace, func(r *v1alpha1.Release) bool { return r.DecisionKey() == key })
}

func (c *Controller) releasesOfConfigMap(namespace, name string, _ map[string]string) []types.NamespacedName {
	return c.releasesWhere(namespace, func(r *v1alpha1.Release) bool {
		if sourceConfigMap(r) == name {
			return true
		}
		if src := r.Spec.Source.Chart; src != nil {
			for _, v := range src.ValuesFrom {
				if v.Kind == "ConfigMap" && v.Name == name {
					return true
				}
			}
		}
		return false
	})
}

// sourceConfigMap is the ConfigMap a Release's source is in, or "".
func sourceConfigMap(r *v1alpha1.Release) string {
	switch src := r.Spec.Source; {
	case src.ConfigMap != nil:
		return src.ConfigMap.Name
	case src.Chart != nil && src.Chart.ConfigMap != nil:
		return src.Chart.ConfigMap.Name
	}
	return ""
}

func (c *Controller) releasesWhere(namespace string, match func(*v1alpha1.Release) bool) []types.NamespacedName {
	objs, err := c.releaseLister.ByNamespace(namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []types.NamespacedName
	for _, o := range objs {
		if r, ok := o.(*v1alpha1.Release); ok && match(r) {
			out = append(out, types.NamespacedName{Namespace: r.Namespace, Name: r.Name})
		}
	}
	return out
}

// fieldManager is a Release's field manager on members: its own, so that two Releases that
// write one object conflict instead of taking turns.
func (c *Controller) fieldManager(key types.NamespacedName) string {
	return fieldManagerFor(c.opts.FieldManager, key.Namespace, key.Name)
}

// fieldManagerFor is the field manager of Release namespace/name under prefix.
func fieldManagerFor(prefix, namespace, name string) string {
	m := prefix + "/" + namespace + "/" + name
	if len(m) > 128 {
		m = m[:128]
	}
	return m
}

// state is a Release's state, made on first use.
func (c *Controller) state(key types.NamespacedName) *releaseState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.releases[key]
	if st == nil {
		st = &releaseState{members: map[types.NamespacedName]*memberState{}}
		c.releases[key] = st
	}
	return st
}

// rewatch makes the watch caches' members those that any Release has objects on.
func (c *Controller) rewatch() {
	c.mu.Lock()
	keep := map[types.NamespacedName]bool{}
	for _, st := range c.releases {
		for m := range st.members {
			keep[m] = true
		}
	}
	c.mu.Unlock()
	old := *c.keep.Load()
	if mapsEqual(old, keep) {
		return
	}
	c.keep.Store(&keep)
	c.watched.Keep(func(k types.NamespacedName) bool { return (*c.keep.Load())[k] })
}

func mapsEqual(a, b map[types.NamespacedName]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// watchKind starts the watch of a resource's Release objects on the watched members, once.
func (c *Controller) watchKind(gvr schema.GroupVersionResource) {
	c.mu.Lock()
	if _, started := c.kinds[gvr]; started {
		c.mu.Unlock()
		return
	}
	c.kinds[gvr] = nil
	c.mu.Unlock()
	kind, err := fleetcache.Dynamic(c.cache, gvr, fleetcache.KindOptions{LabelSelector: v1alpha1.ReleaseNamespaceLabel, KeepManagedFields: true})
	if err == nil {
		err = kind.AddEventHandler(func(ev fleetcache.Event[*unstructured.Unstructured]) { c.onObject(gvr, ev) })
	}
	if err != nil {
		c.log.Error(err, "watching what releases applied", "resource", gvr.String())
		return
	}
	c.mu.Lock()
	c.kinds[gvr] = kind
	c.mu.Unlock()
}

// kind is the watch cache of a resource's Release objects; nil when it is not watched.
func (c *Controller) kind(gvr schema.GroupVersionResource) *fleetcache.Kind[*unstructured.Unstructured] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kinds[gvr]
}

// onObject learns an applied object's health, and any drift, from a member's watch.
func (c *Controller) onObject(gvr schema.GroupVersionResource, ev fleetcache.Event[*unstructured.Unstructured]) {
	if c.deaf.Load() {
		return
	}
	obj := ev.Object
	l := obj.GetLabels()
	member := ev.Member.Name()
	// A Release reaches only its own cluster set's members: an object there labelled with
	// another set's Release is not this one's.
	if l[v1alpha1.ReleaseNamespaceLabel] != member.Namespace {
		return
	}
	key := types.NamespacedName{Namespace: member.Namespace, Name: l[v1alpha1.ReleaseLabel]}
	r := ref{GVR: gvr, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}
	c.mu.Lock()
	st := c.releases[key]
	var changed bool
	if st != nil {
		if ms := st.members[member]; ms != nil {
			if ms.applying {
				ms.during = append(ms.during, watched{r: r, deleted: ev.Type == fleetcache.Deleted, obj: obj})
			} else if a := ms.objects[r]; a != nil {
				changed = c.observe(key, ms, a, ev.Type == fleetcache.Deleted, obj)
			}
		}
	}
	c.mu.Unlock()
	if changed {
		c.queue.Add(key)
	}
}

// watched is one event of a member's watch, kept while the member is being applied to.
type watched struct {
	r       ref
	deleted bool
	obj     *unstructured.Unstructured
}

// observe updates an applied object from the member's watch, with c.mu held; it reports whether
// anything the Release's status or delivery depends on changed. An event of another incarnation
// of the object (deleted before the apply made it again), or older than the apply's answer,
// says nothing of it. Any later copy is judged, whatever revision its labels name: an older
// revision's copy put back (a restore from backup, an exported manifest applied again) is drift.
func (c *Controller) observe(key types.NamespacedName, ms *memberState, a *applied, deleted bool, obj *unstructured.Unstructured) bool {
	if a.uid != "" && obj.GetUID() != a.uid {
		return false
	}
	defer ms.settle(time.Now())
	if deleted {
		if a.gone {
			return false
		}
		a.gone, ms.drifted = true, true
		ms.drift = a.ref.String() + " was deleted on the member"
		return true
	}
	if olderThan(obj.GetResourceVersion(), a.resourceVersion) {
		return false // the watch is behind the apply's answer
	}
	var rules objectRules
	if st := c.releases[key]; st != nil {
		rules = st.rules
	}
	status, msg := rules.health.judge(obj)
	fb := readFeedback(rules.feedback, obj)
	changed := status != a.status || msg != a.message || a.gone || !maps.Equal(fb, a.feedback)
	a.status, a.message, a.gone, a.feedback = status, msg, false, fb
	if ms.drifted {
		return changed
	}
	if rev := obj.GetLabels()[v1alpha1.RevisionLabel]; rev != ms.revision {
		ms.drifted, ms.drift = true, fmt.Sprintf("%s carries revision %q's copy, not revision %s's", a.ref, rev, ms.revision)
		return true
	}
	if f := managerFields(obj, c.fieldManager(key)); a.fields != "" && f != a.fields {
		ms.drifted, ms.drift = true, a.ref.String()+": "+lostFields(a.fields, f)
		return true
	}
	return changed
}

// reconcile brings one Release's members one step closer to its spec, and says when to look
// again if nothing else calls.
func (c *Controller) reconcile(ctx context.Context, key types.NamespacedName) (requeue time.Duration, err error) {
	obj, err := c.releaseLister.ByNamespace(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		delete(c.releases, key)
		c.mu.Unlock()
		c.rewatch()
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	rel := obj.(*v1alpha1.Release)
	st := c.state(key)
	if !st.loaded {
		c.loadInventory(rel, st)
	}
	// Sharded, the replica that owns the Release writes its status and finalizer; each replica
	// applies to the members it owns.
	ownsRelease := c.owns(key)
	if rel.DeletionTimestamp != nil {
		return c.finalize(ctx, rel, st, ownsRelease)
	}
	if !slices.Contains(rel.Finalizers, Finalizer) {
		if !ownsRelease {
			return 0, nil // the Release's owner adds it, and the update brings it back here
		}
		rel = rel.DeepCopy()
		rel.Finalizers = append(rel.Finalizers, Finalizer)
		c.writes.Add(1)
		_, err := c.registry.ClusterregistryV1alpha1().Releases(rel.Namespace).Update(ctx, rel, metav1.UpdateOptions{})
		return 0, err // the update brings the Release back to the queue
	}
	if rel.Spec.Suspend {
		return 0, c.writeStatus(ctx, rel, nil, nil, progress{stalledReason: "Suspended", stalledMessage: "spec.suspend is true: nothing is applied or removed"})
	}

	rules, invalid, err := compileRules(rel)
	if err != nil {
		return 0, c.writeStatus(ctx, rel, nil, nil, progress{stalledReason: invalid, stalledMessage: err.Error()})
	}
	c.setRules(st, rules)
	in, recheck, stall := c.src.inputs(ctx, rel)
	// A Ready Release comes back at least every Recheck (recheck.go).
	defer func() { requeue = pick(pick(requeue, recheck), c.opts.Recheck) }()
	if stall != nil {
		return c.opts.RetryAfter, c.writeStatus(ctx, rel, nil, nil, *stall)
	}
	bundle, err := Render(rel, in)
	if err != nil {
		reason := "InvalidSource"
		if oe := (*OverrideError)(nil); errors.As(err, &oe) {
			reason = "InvalidOverride"
		}
		return 0, c.writeStatus(ctx, rel, nil, nil, progress{stalledReason: reason, stalledMessage: err.Error()})
	}
	return c.deliver(ctx, rel, st, bundle, ownsRelease)
}

// deliver is a pass over a rendered Release: plan from a snapshot, act on the plan, and report
// the status from a plan of what the acts left.
func (c *Controller) deliver(ctx context.Context, rel *v1alpha1.Release, st *releaseState, bundle *Bundle, ownsRelease bool) (time.Duration, error) {
	dec, err := c.decision(rel)
	var unavailable *decisionsUnavailableError
	switch {
	case errors.As(err, &unavailable):
		// Looked at again: the informer lists again by itself, and nothing calls when it does.
		return c.opts.RetryAfter, c.writeStatus(ctx, rel, bundle, nil, progress{stalledReason: "DecisionsUnavailable", stalledMessage: err.Error()})
	case err != nil:
		return 0, c.writeStatus(ctx, rel, bundle, nil, progress{stalledReason: "DecisionNotFound", stalledMessage: err.Error()})
	}
	if cycle := c.dependencyCycle(rel); cycle != "" {
		return c.opts.RetryAfter, c.writeStatus(ctx, rel, bundle, dec, progress{stalledReason: "DependencyCycle",
			stalledMessage: "spec.dependsOn makes a cycle: " + cycle + "; nothing of it is applied until one of them stops depending on the next"})
	}
	c.shareWith(rel, st, bundle.Revision, ownsRelease)
	g := gatesOf(rel, len(dec.Clusters), c.opts.RetryAfter)
	g.approved = Approved(rel, bundle.Revision)
	target := target{bundle: bundle, waves: Waves(dec.Clusters, dec.Groups, rel.Spec.Rollout), gates: g}
	back, err := c.rollingBack(ctx, rel, bundle, target)
	if err != nil {
		return c.opts.RetryAfter, c.writeStatus(ctx, rel, bundle, dec, progress{stalledReason: "RollbackFailed", stalledMessage: err.Error()})
	}
	if back != nil {
		target = *back
	}
	return c.pass(ctx, rel, st, dec, target, ownsRelease)
}

// target is what a pass delivers: a revision, in waves, through gates; stall, if set, is the
// Stalled condition status says whatever the plan (a rollback's).
type target struct {
	bundle *Bundle
	waves  [][]types.NamespacedName
	gates  gates
	stall  *progress
}

// pass plans from a snapshot, acts on the plan, and reports.
func (c *Controller) pass(ctx context.Context, rel *v1alpha1.Release, st *releaseState, dec *decision.Decision, t target, ownsRelease bool) (time.Duration, error) {
	byName := c.memberIndex()
	c.recheck(types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}, st, time.Now())
	snap := c.snapshot(st, dec, t.waves, t.bundle, t.gates, byName)
	var stop *Stop
	if t.stall == nil { // a rollback does not stop
		stop = c.recordedStop(rel, t.bundle.Revision)
	}
	snap.stop = stop
	restart := rel.Annotations[v1alpha1.RestartedAtAnnotation]
	c.mu.Lock()
	snap.resync = st.restarted != nil && *st.restarted != restart
	st.restarted = &restart
	c.mu.Unlock()
	snap.waiting, snap.held = c.dependencyGates(rel, dec.Clusters, snap.leaving)
	p := decide(snap)
	c.mu.Lock()
	recordDepartures(st, p)
	c.mu.Unlock()
	wait := p.wait
	if len(p.apply) > 0 || len(p.remove) > 0 {
		c.act(ctx, rel, st, t.bundle, p, byName)
		if len(p.remove) > 0 {
			c.tellDependencies(rel)
		}
		// Status says where the acts left the rollout, from a plan of what they left; what they
		// changed is judged again at the next pass, with the watch's first events in.
		snap = c.snapshot(st, dec, t.waves, t.bundle, t.gates, byName)
		snap.waiting, snap.held = c.dependencyGates(rel, dec.Clusters, snap.leaving)
		snap.stop = stop
		p, wait = decide(snap), time.Second
	}
	defer c.tellDependents(rel, st, t.bundle.Revision, p)
	pr := progress{snap: &snap, plan: &p}
	switch {
	case t.stall != nil:
		pr.stalledReason, pr.stalledMessage = t.stall.stalledReason, t.stall.stalledMessage
	case p.held:
		pr.stalledReason = "EmptyDecision"
		pr.stalledMessage = fmt.Sprintf("the decision names no member: nothing is removed from the %d members that have the Release's objects; delete the Release to remove them", len(snap.own))
	case p.stopped && rel.Spec.Rollout != nil && rel.Spec.Rollout.OnFailure == v1alpha1.FailureRollback:
		if c.lastComplete(rel, t.bundle.Revision) == nil {
			pr.note = "onFailure is Rollback, but no earlier revision was Ready everywhere: there is nothing to roll back to"
			break
		}
		if !ownsRelease {
			break // the Release's owner records the rollback; this replica follows it
		}
		if err := errors.Join(c.report(ctx, rel, st, t.bundle, dec, snap, p, ownsRelease, pr), c.startRollback(ctx, rel, t.bundle, p)); err != nil {
			return time.Second, err
		}
		return time.Millisecond, nil // the next pass rolls back
	}
	err := c.report(ctx, rel, st, t.bundle, dec, snap, p, ownsRelease, pr)
	if p.stopped && ownsRelease && t.stall == nil {
		err = errors.Join(err, c.recordStop(ctx, rel, t.bundle.Revision, p))
	}
	return wait, err
}

// report tells what the plan says: the Release's events and history (its owner's part) and its
// status.
func (c *Controller) report(ctx context.Context, rel *v1alpha1.Release, st *releaseState, bundle *Bundle, dec *decision.Decision, snap snapshot, p plan, ownsRelease bool, pr progress) error {
	var historyErr error
	if ownsRelease {
		c.tell(rel, st, snap, p)
		if err := c.keepHistory(ctx, rel, bundle, p); err != nil {
			historyErr = fmt.Errorf("recording revision %s in the history: %w", bundle.Revision, err)
		}
	}
	return errors.Join(c.writeStatus(ctx, rel, bundle, dec, pr), historyErr)
}

// snapshot copies, with the Controller's lock, what a pass decides from (see decide). dec nil
// is a Release being deleted: only the members this replica holds.
func (c *Controller) snapshot(st *releaseState, dec *decision.Decision, waves [][]types.NamespacedName, b *Bundle, g gates, byName map[types.NamespacedName]*multicluster.Member) snapshot {
	revision := ""
	if b != nil {
		revision = b.Revision
	}
	// want is the revision a member should run: with the overrides that choose it, when this
	// replica knows its Cluster.
	want := func(k types.NamespacedName) string {
		if cl := c.clusterOf(k, byName); cl != nil && b != nil {
			return b.revisionFor(cl)
		}
		if b != nil && len(b.overrides) == 0 {
			return revision
		}
		return ""
	}
	s := snapshot{now: time.Now(), revision: revision, gates: g, waves: waves, views: map[types.NamespacedName]view{},
		own: map[types.NamespacedName]view{}, mine: map[types.NamespacedName]bool{}, fresh: c.opts.Fresh == nil || c.opts.Fresh()}
	named := map[types.NamespacedName]bool{}
	c.mu.Lock()
	defer c.mu.Unlock()
	if dec != nil {
		s.empty = len(dec.Clusters) == 0
		for _, k := range dec.Clusters {
			named[k] = true
			if ms := st.at(c, k); ms != nil {
				s.views[k] = viewOf(ms, revision, want(k))
			}
			// Sharded, a member not yet in this replica's view waits until it is.
			s.mine[k] = c.owns(k) && (c.opts.Sharding == nil || byName[k] != nil)
		}
	}
	s.health = map[types.NamespacedName]memberHealth{}
	for k, ms := range st.members {
		s.own[k] = viewOf(ms, revision, want(k))
		if dec != nil && !named[k] && c.owns(k) {
			s.leaving = append(s.leaving, k)
			s.health[k] = healthOf(c.clusterOf(k, byName))
		}
	}
	slices.SortFunc(s.leaving, func(a, b types.NamespacedName) int { return cmp.Compare(a.String(), b.String()) })
	return s
}

// act applies to and removes from the members a plan names, MemberConcurrency at a time.
func (c *Controller) act(ctx context.Context, rel *v1alpha1.Release, st *releaseState, bundle *Bundle, p plan, byName map[types.NamespacedName]*multicluster.Member) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.MemberConcurrency)
	for _, k := range p.apply {
		g.Go(func() error { c.applyMember(gctx, rel, bundle, k, byName[k]); return nil })
	}
	for _, k := range p.remove {
		g.Go(func() error { c.removeMember(gctx, rel, st, k, byName[k]); return nil })
	}
	_ = g.Wait()
	c.rewatch()
}

// memberIndex is the members now, by name.
func (c *Controller) memberIndex() map[types.NamespacedName]*multicluster.Member {
	members := c.members.Members()
	byName := make(map[types.NamespacedName]*multicluster.Member, len(members))
	for _, m := range members {
		byName[m.Name()] = m
	}
	return byName
}

// pick is the sooner of two waits, ignoring zero.
func pick(a, b time.Duration) time.Duration {
	if a <= 0 {
		return b
	}
	if b <= 0 {
		return a
	}
	return min(a, b)
}

func driftPolicy(rel *v1alpha1.Release) v1alpha1.ReleaseDriftPolicy {
	if rel.Spec.Drift != nil && rel.Spec.Drift.Policy != "" {
		return rel.Spec.Drift.Policy
	}
	return v1alpha1.DriftCorrect
}

// decision reads the Release's decision from the PlacementDecisions cache.
func (c *Controller) decision(rel *v1alpha1.Release) (*decision.Decision, error) {
	if !c.decisionsSynced() {
		reason := "not listed yet"
		if err := c.decisionsErr.Load(); err != nil {
			reason = (*err).Error()
		}
		return nil, &decisionsUnavailableError{reason: reason}
	}
	key := rel.DecisionKey()
	objs, err := c.decisionLister.ByNamespace(rel.Namespace).List(labels.SelectorFromSet(labels.Set{cpv1alpha1.DecisionKeyLabel: key}))
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no PlacementDecision of namespace %s has decision key %s (is the Placement there, and its scheduler running?)", rel.Namespace, key)
	}
	items := make([]cpv1alpha1.PlacementDecision, 0, len(objs))
	for _, o := range objs {
		items = append(items, *o.(*cpv1alpha1.PlacementDecision))
	}
	return decision.FromSlices(rel.Namespace, key, items), nil
}

// applyMember applies a bundle to one member, prunes what the revision no longer has, and records
// how it went.
func (c *Controller) applyMember(ctx context.Context, rel *v1alpha1.Release, b *Bundle, key types.NamespacedName, m *multicluster.Member) {
	relKey := types.NamespacedName{Namespace: rel.Namespace, Name: rel.Name}
	st := c.state(relKey)
	c.mu.Lock()
	ms := st.members[key]
	if ms == nil {
		ms = &memberState{objects: map[ref]*applied{}}
		st.members[key] = ms
	}
	ms.applying = true
	previous := ms.objects
	c.mu.Unlock()

	// A failed apply may have changed some objects before the error: what the watch said
	// meanwhile is judged as after a whole apply (an object now at the failed revision is drift
	// from the revision the member runs), not dropped.
	fail := func(err *memberError) {
		c.mu.Lock()
		during := ms.during
		revision := b.Revision
		if m != nil {
			revision = b.revisionFor(m.Cluster())
		}
		ms.fail(revision, err, time.Now())
		changed := c.replay(relKey, ms, during)
		c.mu.Unlock()
		if changed {
			c.queue.Add(relKey)
		}
	}
	if m == nil {
		fail(&memberError{class: v1alpha1.FailureClusterNotFound, err: fmt.Errorf("no Cluster %s in the registry (or not among this controller's members)", key)})
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.MemberTimeout)
	defer cancel()
	c.applierFor(b).apply(ctx, rel, b, key, m, ms, previous, fail)
}

// recordApplied records a member's apply of revision, and replays over its answers what the
// watch said meanwhile.
func (c *Controller) recordApplied(relKey types.NamespacedName, ms *memberState, revision string, objects map[ref]*applied) {
	c.mu.Lock()
	ms.applying = false
	appliedAt := time.Now()
	if ms.revision == "" && ms.reported.revision == revision && !ms.reported.applied.IsZero() {
		// The first apply since this Controller started, of the revision the member was
		// reported at: it applied that then. Its lastApplied, and the progress deadline counted
		// from it, stay as they were, so that a restart rewrites no status.
		appliedAt = ms.reported.applied
	}
	ms.revision, ms.applied, ms.objects = revision, appliedAt, objects
	ms.err, ms.failedRev, ms.attempts, ms.drifted, ms.drift, ms.readyAt = nil, "", 0, false, "", time.Time{}
	changed := c.replay(relKey, ms, ms.during)
	ms.during = nil
	ms.settle(time.Now())
	c.mu.Unlock()
	if changed {
		c.queue.Add(relKey)
	}
}

// replay judges, with c.mu held, the watch's events that came while the member was being applied
// to, over what the apply left; it reports whether any changed what the plan depends on.
func (c *Controller) replay(relKey types.NamespacedName, ms *memberState, during []watched) bool {
	changed := false
	for _, ev := range during {
		if a := ms.objects[ev.r]; a != nil && c.observe(relKey, ms, a, ev.deleted, ev.obj) {
			changed = true
		}
	}
	return changed
}

// prune removes from a member what the previous revision applied and this one does not, in
// reverse apply order. An object it could not remove stays in objects, with its error, so that
// the next turn tries again.
func (c *Controller) prune(ctx context.Context, rel *v1alpha1.Release, key types.NamespacedName, m *multicluster.Member, mc *memberClients, previous, objects map[ref]*applied) *memberError {
	var stale []ref
	for r := range previous {
		if objects[r] == nil {
			stale = append(stale, r)
		}
	}
	for _, r := range removalOrder(stale) {
		if r.GVR == helmReleaseGVR { // the Release was in Helm mode: its Helm release goes
			if err := c.removeHelm(ctx, key, m, r); err != nil {
				objects[r] = &applied{ref: r, status: "Error", message: message(err)}
				return &memberError{class: classify(ctx, err), object: r.String(), err: fmt.Errorf("uninstalling the Helm release of Helm mode: %w", err)}
			}
			continue
		}
		c.writes.Add(1)
		if err := mc.deleteOne(ctx, r, rel.Name, rel.Namespace); err != nil {
			objects[r] = &applied{ref: r, status: "Error", message: message(err)}
			return &memberError{class: classify(ctx, err), object: r.String(), err: fmt.Errorf("pruning: %w", err)}
		}
	}
	return nil
}

// removeMember removes a Release's objects from a member it no longer reaches (DeletionPolicy
// Delete), in reverse apply order; a member no longer in the registry is forgotten.
func (c *Controller) removeMember(ctx context.Context, rel *v1alpha1.Release, st *releaseState, key types.NamespacedName, m *multicluster.Member) {
	c.mu.Lock()
	ms := st.members[key]
	if ms == nil {
		c.mu.Unlock()
		return
	}
	ms.removing = true
	refs := make([]ref, 0, len(ms.objects))
	for r := range ms.objects {
		refs = append(refs, r)
	}
	c.mu.Unlock()
	done := func() {
		c.mu.Lock()
		delete(st.members, key)
		c.mu.Unlock()
	}
	if m == nil || rel.Spec.DeletionPolicy == v1alpha1.DeletionOrphan {
		done()
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.MemberTimeout)
	defer cancel()
	mc, err := c.clients.get(ctx, m)
	if err == nil {
		for _, r := range removalOrder(refs) {
			if r.GVR == helmReleaseGVR {
				if err = c.removeHelm(ctx, key, m, r); err != nil {
					break
				}
				continue
			}
			c.writes.Add(1)
			if err = mc.deleteOne(ctx, r, rel.Name, rel.Namespace); err != nil {
				break
			}
		}
	}
	if err != nil {
		c.mu.Lock()
		ms.err, ms.failedAt = &memberError{class: classify(ctx, err), err: fmt.Errorf("removing: %w", err)}, time.Now()
		ms.settle(ms.failedAt)
		c.mu.Unlock()
		return
	}
	done()
}

// finalize removes a deleted Release's objects from every member, then lets it go.
func (c *Controller) finalize(ctx context.Context, rel *v1alpha1.Release, st *releaseState, ownsRelease bool) (time.Duration, error) {
	if !slices.Contains(rel.Finalizers, Finalizer) {
		return 0, nil
	}
	byName := c.memberIndex()
	reported := c.shareWith(rel, st, "", ownsRelease)
	c.mu.Lock()
	var keys []types.NamespacedName
	for k := range st.members {
		if c.owns(k) { // the others wait for their owner to take them
			keys = append(keys, k)
		}
	}
	c.mu.Unlock()
	// Dependents leave a member first: where one still has its objects, this Release waits.
	_, held := c.dependencyGates(rel, nil, keys)
	keys = slices.DeleteFunc(keys, func(k types.NamespacedName) bool { return held[k] != "" })
	defer c.tellDependencies(rel)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.opts.MemberConcurrency)
	for _, k := range keys {
		g.Go(func() error { c.removeMember(gctx, rel, st, k, byName[k]); return nil })
	}
	_ = g.Wait()
	c.mu.Lock()
	left := len(st.members)
	c.mu.Unlock()
	c.rewatch()
	if ownsRelease {
		// Sharded, the other replicas' members too: their slices name the members they have
		// not yet removed.
		left += reported
	}
	if left > 0 || !ownsRelease {
		snap := c.snapshot(st, nil, nil, nil, gates{}, nil)
		msg := fmt.Sprintf("%d members still have the Release's objects", left)
		for _, why := range held {
			msg += fmt.Sprintf(" (%d wait: %s)", len(held), why)
			break
		}
		err := c.writeStatus(ctx, rel, nil, nil, progress{snap: &snap, stalledReason: "Removing", stalledMessage: msg})
		if left == 0 {
			return 0, err // this replica's part is done; the Release's owner lets it go
		}
		return c.opts.RetryAfter, err
	}
	rel = rel.DeepCopy()
	rel.Finalizers = slices.DeleteFunc(rel.Finalizers, func(f string) bool { return f == Finalizer })
	c.writes.Add(1)
	_, err := c.registry.ClusterregistryV1alpha1().Releases(rel.Namespace).Update(ctx, rel, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return 0, err
}

// loadInventory reads, once per Release, what its status slices say it applied where: after a
// restart, a member that leaves the decision still has its objects removed.
func (c *Controller) loadInventory(rel *v1alpha1.Release, st *releaseState) {
	mine, _ := c.slicesOf(rel)
	c.mu.Lock()
	defer c.mu.Unlock()
	st.loaded = true
	for _, s := range mine {
		for _, m := range s.Members {
			key := types.NamespacedName{Namespace: rel.Namespace, Name: m.Cluster}
			if st.members[key] != nil || len(m.Objects) == 0 {
				continue
			}
			st.members[key] = inventory(m)
		}
	}
}

// shareWith reads the other replicas' slices of a Release and shares its members with them (see
// share); it says how many members they report objects on.
func (c *Controller) shareWith(rel *v1alpha1.Release, st *releaseState, revision string, ownsRelease bool) int {
	_, others := c.slicesOf(rel)
	reps := c.reports(others, c.live())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.share(st, reps, revision, ownsRelease)
	n := 0
	for _, r := range reps {
		if len(r.status.Objects) > 0 {
			n++
		}
	}
	return n
}

func describe(u *unstructured.Unstructured, r ref) string {
	if r.Name != "" {
		return r.String()
	}
	ns := u.GetNamespace()
	if ns != "" {
		ns += "/"
	}
	return fmt.Sprintf("%s %s%s", u.GroupVersionKind().GroupKind(), ns, u.GetName())
}

func isNoMatchOrDiscovery(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || errors.Is(err, context.DeadlineExceeded))
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T is not an object", obj)
	}
	return m, nil
}
