package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
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
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	cpinformers "sigs.k8s.io/cluster-inventory-api/client/informers/externalversions"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/fleetcache"
	informers "github.com/cluster-registry/sdk/informers/externalversions"
	"github.com/cluster-registry/sdk/internal/reconcilequeue"
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
	// Lease, if set, is a Lease that the Controller must hold in a cluster set's own namespace to
	// act on that set's Releases: two Controllers of one set that are not sharded (a second
	// process started by hand beside a Deployment's, one of every set beside one of that set)
	// take turns, the second waiting, rather than both apply its Releases and write their
	// status. With every set (Namespace empty) the Controller contends in each set it finds
	// Releases in. Name defaults to DefaultLeaseName; Namespace must be empty (or Namespace),
	// since the Lease's place is the set's, never the caller's choice; the rest as
	// election.Lease.Defaulted. Not with Sharding, whose replicas divide the work instead.
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
	// ctrl is controller-runtime's controller of the Releases (its queue, rate limiting,
	// workers, metrics and logs), whose Reconciler c is; queue is its queue as the Controller's
	// handlers add to it.
	ctrl    controller.TypedController[reconcile.Request]
	queue   reconcilequeue.Queue
	clients clientsCache
	// replica labels this replica's status slices (replicaHash); "" when not sharded.
	replica string

	// watched are the members any Release has objects on: the watch caches' members.
	watched *multicluster.Subset
	keep    atomic.Pointer[map[types.NamespacedName]bool]
	cache   *fleetcache.Cache

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
	// sets are the cluster sets' Leases, with ControllerOptions.Lease (setlease.go); nil without.
	sets *setLeases
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
	var lease *election.Lease
	if opts.Lease != nil {
		var err error
		if lease, err = defaultedLease(opts); err != nil {
			return nil, err
		}
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	c := &Controller{
		members: members, registry: registry, kube: kube, decisions: decisions, opts: opts, log: log,
		watched:  multicluster.NewSubset(),
		releases: map[types.NamespacedName]*releaseState{},
		kinds:    map[schema.GroupVersionResource]*fleetcache.Kind[*unstructured.Unstructured]{},
	}
	if opts.Sharding != nil {
		c.replica = replicaHash(opts.Sharding.Replica)
	}
	if lease != nil {
		c.sets = &setLeases{base: *lease, leases: kube.CoordinationV1(), log: log, led: c.enqueueSet, sets: map[string]*atomic.Bool{}}
	}
	c.keep.Store(&map[types.NamespacedName]bool{})
	c.cache = fleetcache.New(c.watched)

	if err := c.informers(); err != nil {
		return nil, err
	}
	var err error
	// Several Controllers may run in one process (one per cluster set): the name is not unique.
	if c.ctrl, err = controller.NewTypedUnmanaged("releases", controller.TypedOptions[reconcile.Request]{
		Reconciler: c, MaxConcurrentReconciles: opts.Workers, SkipNameValidation: ptr.To(true), Logger: log,
	}); err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
	}
	if err := c.ctrl.Watch(c.queue.Source()); err != nil {
		return nil, fmt.Errorf("delivery: %w", err)
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
	if l := c.sets; l != nil {
		c.log.Info("acting on a cluster set's Releases only while holding the Lease of that name in the set: another releases controller of the set that holds it is waited for",
			"lease", l.base.Name, "identity", l.base.Identity)
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
	if lease.Namespace != "" && lease.Namespace != opts.Namespace {
		return nil, fmt.Errorf("delivery: ControllerOptions.Lease.Namespace %q: a cluster set's Lease lives in the set's own namespace, so that its controllers meet there whatever their options; leave it empty", lease.Namespace)
	}
	lease.Name, lease.Namespace = cmp.Or(lease.Name, DefaultLeaseName), ""
	check := lease
	check.Namespace = "each-set" // setLeases names each set's
	if err := check.Validate(); err != nil {
		return nil, fmt.Errorf("delivery: ControllerOptions.Lease: %w", err)
	}
	return &lease, nil
}

func (c *Controller) run(ctx context.Context) error {
	if c.sets != nil {
		defer c.sets.wait() // after cancel: the sets' elections end with ctx
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if c.sets != nil {
		c.sets.start(ctx)
		if c.opts.Namespace != "" {
			c.sets.leads(c.opts.Namespace) // its one set's, from the start
		}
	}
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
	// Start returns once ctx ends and the workers have finished what they were doing; a start
	// that ctx's end cut short is a stop, not a failure.
	err = c.ctrl.Start(ctx)
	if ctx.Err() != nil {
		return nil
	}
	cancel() // the informers stop with the controller, before wg.Wait
	return err
}

// conflictRetry is how soon a Release whose write met a newer Release is worked on again: its
// informer brings the newer one within moments.
const conflictRetry = 20 * time.Millisecond

// Reconcile works on the request's Release, for controller-runtime's controller: an error is
// retried with its rate limit and logged, a conflict retried soon without a word, and a Release
// that must be looked at again later (a wave's soak, a recheck) is a RequeueAfter.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	after, err := c.reconcile(ctx, req.NamespacedName)
	switch {
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("release %s not reconciled: %w", req.NamespacedName, err)
	}
	return reconcile.Result{RequeueAfter: max(after, 0)}, nil
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
