package clusterprofile

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	cpinformers "sigs.k8s.io/cluster-inventory-api/client/informers/externalversions"
	cplisters "sigs.k8s.io/cluster-inventory-api/client/listers/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/informers/externalversions"
	crlisters "github.com/cluster-registry/sdk/listers/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// PublishOptions configure a Publisher.
type PublishOptions struct {
	// Namespaces are the cluster sets to publish; every namespace when empty. With Members, they
	// are where the Publisher watches its profiles, and a member of another namespace is not
	// published.
	Namespaces []string
	// ManagerName is the profiles' spec.clusterManager.name and the value of their
	// x-k8s.io/cluster-manager label; DefaultManagerName when empty. Run one Publisher per name.
	ManagerName string
	// AccessProvider names the access provider each profile offers; DefaultAccessProvider when
	// empty.
	AccessProvider string
	// Resolver chooses the server and CA each profile offers, under its trust rules. Required
	// unless Members is set; with Members, the members' own (their Fleet's) when nil.
	Resolver *access.Resolver
	// Members, if set, are the Clusters to publish, taken from a Fleet the process shares (or a
	// shard.View of one, so that replicas divide the work): the Publisher then holds no watch of
	// Clusters of its own. A member that leaves Members keeps its
	// profile unless its Cluster is gone (it may have moved to another replica); a profile whose
	// Cluster was deleted while no Publisher ran is removed by the garbage collector, through its
	// owner reference.
	Members multicluster.ChangeSource
	// TunnelProxy is where the profiles' consumers reach clusterregistry tunnel-proxy (host:port;
	// each runs its own beside it, usually 127.0.0.1:8118). A member reached through a tunnel
	// (spec.kubernetesApiEndpoints.tunnel) then offers an access provider whose proxy-url goes
	// through it, naming the Cluster. Without it, such a member's profile offers no access
	// provider: its server is an address in the member's own network, which a consumer's direct
	// dial would not reach, and what proxy a consumer uses is the publisher's to say, never the
	// Cluster's editor's.
	TunnelProxy string
	// Workers is how many profiles are written at once; 4 when zero.
	Workers int
	// Logger hears what could not be published, and why; controller-runtime's logger named
	// "clusterprofile" when unset.
	Logger logr.Logger
}

func (o PublishOptions) withDefaults() PublishOptions {
	if o.ManagerName == "" {
		o.ManagerName = DefaultManagerName
	}
	if o.AccessProvider == "" {
		o.AccessProvider = DefaultAccessProvider
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logf.Log.WithName("clusterprofile")
	}
	return o
}

// Publisher keeps a ClusterProfile for each Cluster of the registry (see Profile), writing only
// what changed: an unchanged registry costs no write. Make one with NewPublisher and Run it.
type Publisher struct {
	registry versioned.Interface
	profiles cpversioned.Interface
	opts     PublishOptions

	clusters     map[string]crlisters.ClusterLister // by namespace; "" for all
	profileLists map[string]cplisters.ClusterProfileLister
	// ctrl is controller-runtime's controller of the profiles: its queue, rate limiting, workers,
	// metrics and logs; p is its Reconciler.
	ctrl     controller.TypedController[reconcile.Request]
	synced   []cache.InformerSynced
	start    []func(stop <-chan struct{})
	shutdown []func()

	// members are Members' members by key, kept from its events; removed are the keys of those
	// that left it and are not yet known to be deleted or kept.
	membersMu sync.Mutex
	members   map[types.NamespacedName]*multicluster.Member
	removed   map[types.NamespacedName]bool

	// superseded holds, by Cluster key, the resourceVersion of the last profile this Publisher
	// replaced by a write of its own: the informer may still show it, and writing on it again
	// would only be refused as a conflict.
	superseded sync.Map
}

// NewPublisher returns a Publisher of the registry's Clusters into ClusterProfiles written with
// profiles (usually a client of the same API server).
func NewPublisher(registry versioned.Interface, profiles cpversioned.Interface, opts PublishOptions) (*Publisher, error) {
	if opts.Resolver == nil && opts.Members == nil {
		return nil, errors.New("clusterprofile: PublishOptions.Resolver is required: it chooses the server and CA each profile offers")
	}
	opts = opts.withDefaults()
	p := &Publisher{
		registry:     registry,
		profiles:     profiles,
		opts:         opts,
		clusters:     map[string]crlisters.ClusterLister{},
		profileLists: map[string]cplisters.ClusterProfileLister{},
		members:      map[types.NamespacedName]*multicluster.Member{},
		removed:      map[types.NamespacedName]bool{},
	}
	var err error
	// Several Publishers may run in one process (one per cluster set): the name is not unique.
	if p.ctrl, err = controller.NewTypedUnmanaged("clusterprofile-publisher", controller.TypedOptions[reconcile.Request]{
		Reconciler: p, MaxConcurrentReconciles: opts.Workers, SkipNameValidation: ptr.To(true), Logger: opts.Logger,
	}); err != nil {
		return nil, fmt.Errorf("clusterprofile: %w", err)
	}
	namespaces := opts.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	managed := labels.SelectorFromSet(labels.Set{cpv1alpha1.LabelClusterManagerKey: opts.ManagerName}).String()
	for _, ns := range namespaces {
		cf := externalversions.NewSharedInformerFactoryWithOptions(registry, 0, externalversions.WithNamespace(ns))
		pf := cpinformers.NewSharedInformerFactoryWithOptions(profiles, 0, cpinformers.WithNamespace(ns),
			cpinformers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = managed }))
		pi := pf.Apis().V1alpha1().ClusterProfiles()
		informers := []cache.SharedIndexInformer{pi.Informer()}
		if opts.Members == nil {
			ci := cf.Clusterregistry().V1alpha1().Clusters()
			informers = append(informers, ci.Informer())
			p.clusters[ns] = ci.Lister()
		}
		for _, inf := range informers {
			if err := p.ctrl.Watch(&crsource.Informer{Informer: inf, Handler: &handler.EnqueueRequestForObject{}}); err != nil {
				return nil, err
			}
			p.synced = append(p.synced, inf.HasSynced)
		}
		p.profileLists[ns] = pi.Lister()
		p.start = append(p.start, cf.Start, pf.Start)
		p.shutdown = append(p.shutdown, cf.Shutdown, pf.Shutdown)
	}
	return p, nil
}

// onMember follows Members' membership (the queue q's Cluster keys).
func (p *Publisher) onMember(q workqueue.TypedRateLimitingInterface[reconcile.Request], ev multicluster.MemberEvent) {
	key := ev.Member.Name()
	p.membersMu.Lock()
	if ev.Type == multicluster.MemberRemoved {
		delete(p.members, key)
		p.removed[key] = true
	} else {
		p.members[key] = ev.Member
		delete(p.removed, key)
	}
	p.membersMu.Unlock()
	q.Add(reconcile.Request{NamespacedName: key})
}

// cluster is key's Cluster: from Members (nil and whether it just left them), or from the
// Publisher's own informer.
func (p *Publisher) cluster(key types.NamespacedName) (c *v1alpha1.Cluster, member *multicluster.Member, left bool, err error) {
	if p.opts.Members == nil {
		clusters, _ := p.listers(key.Namespace)
		c, err = clusters.Clusters(key.Namespace).Get(key.Name)
		if apierrors.IsNotFound(err) {
			return nil, nil, true, nil
		}
		return c, nil, false, err
	}
	p.membersMu.Lock()
	defer p.membersMu.Unlock()
	if m := p.members[key]; m != nil {
		return m.Cluster(), m, false, nil
	}
	return nil, nil, p.removed[key], nil
}

// gone reports whether a Cluster that left Members is deleted (rather than owned by another
// replica, or out of the Fleet's selector), asking the registry.
func (p *Publisher) gone(ctx context.Context, key types.NamespacedName) (bool, error) {
	if p.opts.Members == nil {
		return true, nil // the informer said so
	}
	_, err := p.registry.ClusterregistryV1alpha1().Clusters(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("asking the registry whether Cluster %s is deleted: %w", key, err)
	}
	p.membersMu.Lock()
	delete(p.removed, key)
	p.membersMu.Unlock()
	return false, nil
}

// Run publishes until ctx is done, then returns once its workers and informers have stopped. On a
// registry without the ClusterProfile CRD it returns at once an error that says what to install
// (errors.Is(err, ErrNotServed)).
func (p *Publisher) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	// Without the CRD, the informers would retry their list every second or two for ever.
	if err := Served(p.profiles.Discovery()); err != nil {
		return fmt.Errorf("clusterprofile: %w", err)
	}
	stop := ctx.Done()
	for _, start := range p.start {
		start(stop)
	}
	defer func() {
		for _, shutdown := range p.shutdown {
			shutdown()
		}
	}()
	if !cache.WaitForCacheSync(stop, p.synced...) {
		return fmt.Errorf("clusterprofile: the caches of Clusters and ClusterProfiles did not sync: %w", context.Cause(ctx))
	}
	if m := p.opts.Members; m != nil {
		// Members' events, and changes to a member's Cluster, are the third source of keys.
		err := p.ctrl.Watch(crsource.TypedFunc[reconcile.Request](func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			unsubscribe := m.Subscribe(func(ev multicluster.MemberEvent) { p.onMember(q, ev) })
			unsubscribeChanges := m.SubscribeChanges(func(m *multicluster.Member) { q.Add(reconcile.Request{NamespacedName: m.Name()}) })
			context.AfterFunc(ctx, func() { unsubscribe(); unsubscribeChanges() })
			return nil
		}))
		if err != nil {
			return fmt.Errorf("clusterprofile: %w", err)
		}
	}
	// Start returns once ctx ends and the workers have finished what they were doing; a start
	// that ctx's end cut short (its sources not yet synced) is a stop, not a failure.
	if err := p.ctrl.Start(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// Reconcile publishes the profile of the request's Cluster, for controller-runtime's controller:
// an error is retried with its rate limit, and logged by it.
func (p *Publisher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if err := p.sync(ctx, req.NamespacedName); err != nil {
		return reconcile.Result{}, fmt.Errorf("publishing the ClusterProfile of Cluster %s: %w", req.NamespacedName, err)
	}
	return reconcile.Result{}, nil
}

// sync makes the profile of key what its Cluster says, or removes it with its Cluster.
func (p *Publisher) sync(ctx context.Context, key types.NamespacedName) error {
	_, profiles := p.listers(key.Namespace)
	if profiles == nil {
		return nil // a member outside Namespaces
	}
	existing, err := profiles.ClusterProfiles(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		existing = nil
	} else if err != nil {
		return err
	}
	c, member, left, err := p.cluster(key)
	if err != nil {
		return err
	}
	if c == nil {
		if !left || existing == nil || !managedBy(existing, p.opts.ManagerName) {
			return nil // not this Publisher's to judge: another replica's member, or none
		}
		if gone, err := p.gone(ctx, key); err != nil || !gone {
			return err
		}
		p.superseded.Delete(key)
		err := p.profiles.ApisV1alpha1().ClusterProfiles(key.Namespace).Delete(ctx, key.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &existing.UID}})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	if rv, ok := p.superseded.Load(key); ok && existing != nil && existing.ResourceVersion == rv {
		return nil // the informer has yet to show this Publisher's own last write, which is coming
	}
	resolved, err := p.resolve(ctx, c, member)
	if err != nil {
		// Published without an access provider: consumers see the cluster, not a way in that the
		// trust rules did not choose. Retried when the Cluster or its profile changes.
		p.opts.Logger.Info("publishing a ClusterProfile without an access provider: the Cluster does not resolve", "cluster", key.String(), "reason", err.Error())
		resolved = nil
	}
	desired := Profile(c, resolved, p.opts)
	return p.write(ctx, key, existing, desired)
}

// resolve is the Resolver's answer for c, or else the member's own.
func (p *Publisher) resolve(ctx context.Context, c *v1alpha1.Cluster, member *multicluster.Member) (*access.Resolved, error) {
	if p.opts.Resolver != nil || member == nil {
		return p.opts.Resolver.Resolve(ctx, c)
	}
	return member.Access(ctx)
}

func (p *Publisher) listers(namespace string) (crlisters.ClusterLister, cplisters.ClusterProfileLister) {
	if l, ok := p.profileLists[namespace]; ok {
		return p.clusters[namespace], l
	}
	return p.clusters[metav1.NamespaceAll], p.profileLists[metav1.NamespaceAll]
}

// write creates or updates the profile, spec and status, when they differ from desired.
func (p *Publisher) write(ctx context.Context, key types.NamespacedName, existing, desired *cpv1alpha1.ClusterProfile) error {
	client := p.profiles.ApisV1alpha1().ClusterProfiles(desired.Namespace)
	if existing == nil {
		created, err := client.Create(ctx, desired, metav1.CreateOptions{FieldManager: p.opts.ManagerName})
		if apierrors.IsAlreadyExists(err) {
			// Not in our cache: another manager's profile of the same name. Never taken over.
			return &ForeignProfileError{Namespace: desired.Namespace, Name: desired.Name}
		}
		if err != nil {
			return fmt.Errorf("creating %s: %w", profileKey(desired.Namespace, desired.Name), err)
		}
		existing = created
	}
	if !equality.Semantic.DeepEqual(existing.Spec, desired.Spec) || !equality.Semantic.DeepEqual(existing.Labels, desired.Labels) ||
		!equality.Semantic.DeepEqual(existing.OwnerReferences, desired.OwnerReferences) {
		update := existing.DeepCopy()
		update.Spec, update.Labels, update.OwnerReferences = desired.Spec, desired.Labels, desired.OwnerReferences
		updated, err := client.Update(ctx, update, metav1.UpdateOptions{FieldManager: p.opts.ManagerName})
		if err != nil {
			return fmt.Errorf("updating %s: %w", profileKey(desired.Namespace, desired.Name), err)
		}
		p.superseded.Store(key, existing.ResourceVersion)
		existing = updated
	}
	status := desired.Status.DeepCopy()
	for i := range status.Conditions {
		status.Conditions[i].ObservedGeneration = existing.Generation
	}
	if !equality.Semantic.DeepEqual(existing.Status, *status) {
		update := existing.DeepCopy()
		update.Status = *status
		if _, err := client.UpdateStatus(ctx, update, metav1.UpdateOptions{FieldManager: p.opts.ManagerName}); err != nil {
			return fmt.Errorf("writing the status of %s: %w", profileKey(desired.Namespace, desired.Name), err)
		}
		p.superseded.Store(key, existing.ResourceVersion)
	}
	return nil
}

// ForeignProfileError: a ClusterProfile of the Cluster's namespace and name exists and is not
// this registry's (another cluster manager's). The Publisher leaves it alone.
type ForeignProfileError struct{ Namespace, Name string }

func (e *ForeignProfileError) Error() string {
	return fmt.Sprintf("%s belongs to another cluster manager; it is left alone, and Cluster %s/%s is not published", profileKey(e.Namespace, e.Name), e.Namespace, e.Name)
}
