package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	crinformers "github.com/cluster-registry/sdk/informers/externalversions/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/reconcilequeue"
	"github.com/cluster-registry/sdk/internal/safetext"
	"github.com/cluster-registry/sdk/internal/served"
	crlisters "github.com/cluster-registry/sdk/listers/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/placement"
)

// ControllerOptions configure a Controller.
type ControllerOptions struct {
	Options
	// Namespace is the cluster set whose Placements are decided; every namespace when empty.
	Namespace string
	// Owns, if set, says which Placements this replica decides (with package shard, the ones
	// it owns among the live replicas); all when nil. It is asked again every OwnsInterval, so
	// that a Placement moves when the replicas change. A Placement this replica stops owning
	// keeps its decision for the next owner.
	Owns func(types.NamespacedName) bool
	// OwnsInterval is how often Owns is asked again; 2s when zero.
	OwnsInterval time.Duration
}

// Controller keeps the decisions of a registry's Placements written, and their status true: it
// watches Placements, gives their policies to a Scheduler, and writes each Placement's status
// from its decisions (observed generation, Satisfied and Misconfigured, candidates counted by
// reason). A Placement whose policy cannot be used is Misconfigured, and its decision is kept
// as last written (not emptied, not re-decided) until the policy is fixed. A deleted
// Placement's decision is deleted.
type Controller struct {
	registry versioned.Interface
	sched    *Scheduler
	opts     ControllerOptions
	informer cache.SharedIndexInformer
	lister   crlisters.PlacementLister
	// ctrl is controller-runtime's controller of the Placements' status (its queue, rate
	// limiting, workers, metrics and logs), whose Reconciler c is; queue is its queue as the
	// Scheduler's outcomes and the owners' changes add to it.
	ctrl  controller.TypedController[reconcile.Request]
	queue reconcilequeue.Queue

	mu       sync.Mutex
	deciding map[types.NamespacedName]given // the Placements given to the Scheduler
	outcomes map[types.NamespacedName]outcome
}

// given is what the Scheduler was given for a Placement: of which object, and which generation.
type given struct {
	uid        types.UID
	generation int64
}

// outcome is what the status of a Placement reports: its policy's error, or its last decision,
// and whether the decision could not be written since.
type outcome struct {
	generation int64
	invalid    error
	decided    *placement.Decision
	failed     error
	// lastRebalance is when a rebalance last moved the placement's members, as the Scheduler
	// knows it.
	lastRebalance time.Time
}

// NewController is a Controller of the Placements in registry, deciding over members (a Fleet:
// every member of the cluster sets, even with package shard, since a decision weighs them all)
// and writing decisions with decisions.
func NewController(members multicluster.ChangeSource, registry versioned.Interface, decisions cpversioned.Interface, opts ControllerOptions) (*Controller, error) {
	if opts.OwnsInterval <= 0 {
		opts.OwnsInterval = 2 * time.Second
	}
	c := &Controller{
		registry: registry, opts: opts,
		deciding: map[types.NamespacedName]given{},
		outcomes: map[types.NamespacedName]outcome{},
	}
	schedOpts := opts.Options
	user := schedOpts.Decided
	schedOpts.Decided = func(p Placement, d placement.Decision) {
		c.mu.Lock()
		c.outcomes[p.Key] = outcome{generation: p.Generation, decided: &d, lastRebalance: p.LastRebalance}
		c.mu.Unlock()
		c.queue.Add(p.Key)
		if user != nil {
			user(p, d)
		}
	}
	userFailed := schedOpts.Failed
	schedOpts.Failed = func(p Placement, err error) {
		c.mu.Lock()
		o := c.outcomes[p.Key]
		if o.generation != p.Generation || o.invalid != nil {
			o = outcome{generation: p.Generation}
		}
		o.failed = err
		c.outcomes[p.Key] = o
		c.mu.Unlock()
		c.queue.Add(p.Key)
		if userFailed != nil {
			userFailed(p, err)
		}
	}
	sched, err := New(members, decisions, schedOpts)
	if err != nil {
		return nil, err
	}
	c.sched = sched
	c.opts.Options = sched.opts
	c.informer = crinformers.NewPlacementInformer(registry, opts.Namespace, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	c.lister = crlisters.NewPlacementLister(c.informer.GetIndexer())
	// Several Controllers may run in one process (one per cluster set): the name is not unique.
	if c.ctrl, err = controller.NewTypedUnmanaged("placements", controller.TypedOptions[reconcile.Request]{
		Reconciler: c, MaxConcurrentReconciles: max(1, c.opts.Workers/2), SkipNameValidation: ptr.To(true), Logger: c.opts.Logger,
	}); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if err := c.ctrl.Watch(&crsource.Informer{Informer: c.informer, Handler: &handler.EnqueueRequestForObject{}}); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	if err := c.ctrl.Watch(c.queue.Source()); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	return c, nil
}

// Scheduler is the Scheduler the Controller feeds (for its Writes).
func (c *Controller) Scheduler() *Scheduler { return c.sched }

// Run watches Placements and keeps their decisions and status until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.informer.Run(ctx.Done()) })
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return nil // ctx ended first
	}
	wg.Go(func() { _ = c.sched.Run(ctx) })
	if c.opts.Owns != nil {
		wg.Go(func() { c.followOwners(ctx) })
	}
	// Start returns once ctx ends and the workers have finished what they were doing; a start
	// that ctx's end cut short (its sources not yet synced) is a stop, not a failure.
	err := c.ctrl.Start(ctx)
	if ctx.Err() != nil {
		return nil
	}
	cancel() // the informers stop with the controller, before wg.Wait
	return err
}

// followOwners asks again, now and then, who owns every Placement (ownership follows the
// replicas), and has those whose owner changed looked at again, until ctx ends.
func (c *Controller) followOwners(ctx context.Context) {
	t := time.NewTicker(c.opts.OwnsInterval)
	defer t.Stop()
	owned := map[types.NamespacedName]bool{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			seen := map[types.NamespacedName]bool{}
			for _, k := range c.informer.GetStore().ListKeys() {
				ns, name, err := cache.SplitMetaNamespaceKey(k)
				if err != nil {
					continue
				}
				key := types.NamespacedName{Namespace: ns, Name: name}
				now := c.opts.Owns(key)
				if was, ok := owned[key]; !ok || was != now {
					c.queue.Add(key)
				}
				owned[key], seen[key] = now, true
			}
			maps.DeleteFunc(owned, func(key types.NamespacedName, _ bool) bool { return !seen[key] })
		}
	}
}

// Reconcile gives the Scheduler what it must decide of the request's Placement, and writes its
// status, for controller-runtime's controller: an error is retried with its rate limit.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return c.sync(ctx, req.NamespacedName)
}

// sync gives the Scheduler what it must decide of key (or takes it away), then writes key's
// status if it differs from what it should say.
func (c *Controller) sync(ctx context.Context, key types.NamespacedName) (reconcile.Result, error) {
	p, err := c.lister.Placements(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		c.mu.Lock()
		_, known := c.outcomes[key]
		c.mu.Unlock()
		if c.drop(key) || known {
			c.sched.Remove(key) // its decision goes with it, decided here or frozen
		}
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if c.opts.Owns != nil && !c.opts.Owns(key) {
		if c.drop(key) {
			c.sched.Forget(key) // another replica's now; the decision stays for it
		}
		return reconcile.Result{}, nil
	}
	c.mu.Lock()
	g, was := c.deciding[key]
	o, decided := c.outcomes[key]
	c.mu.Unlock()
	uptodate := was && g.uid == p.UID && g.generation == p.Generation
	knownInvalid := decided && o.invalid != nil && o.generation == p.Generation
	if !uptodate && !knownInvalid {
		compiled, err := placement.Compile(p.Spec)
		c.mu.Lock()
		if err != nil {
			delete(c.deciding, key)
			c.outcomes[key] = outcome{generation: p.Generation, invalid: err}
		} else {
			c.deciding[key] = given{uid: p.UID, generation: p.Generation}
		}
		c.mu.Unlock()
		switch {
		case err != nil && was:
			c.sched.Forget(key) // keep the decision as it was written, until the policy is fixed
		case err == nil:
			c.sched.Set(Placement{Key: key, Policy: compiled, Generation: p.Generation, Owner: ownerOf(p), LastRebalance: lastRebalance(p)})
		}
	}
	c.mu.Lock()
	o, decided = c.outcomes[key]
	c.mu.Unlock()
	if !decided || o.decided == nil && o.invalid == nil && o.failed == nil {
		return reconcile.Result{}, nil // the Scheduler's Decided (or Failed) brings it back
	}
	status := statusOf(p, o, time.Now())
	if equality.Semantic.DeepEqual(status, p.Status) {
		return reconcile.Result{}, nil
	}
	update := p.DeepCopy()
	update.Status = status
	_, err = c.registry.ClusterregistryV1alpha1().Placements(key.Namespace).UpdateStatus(ctx, update, metav1.UpdateOptions{FieldManager: c.opts.SchedulerName})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil // the watch brings the newer object
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("writing the status of Placement %s: %w", key, err)
	}
	return reconcile.Result{}, nil
}

// drop forgets what the Controller knew of key, and reports whether the Scheduler was deciding it.
func (c *Controller) drop(key types.NamespacedName) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, was := c.deciding[key]
	delete(c.deciding, key)
	delete(c.outcomes, key)
	return was
}

// lastRebalance is p's status.lastRebalanceTime; zero when unset.
func lastRebalance(p *v1alpha1.Placement) time.Time {
	if t := p.Status.LastRebalanceTime; t != nil {
		return t.Time
	}
	return time.Time{}
}

func ownerOf(p *v1alpha1.Placement) *metav1.OwnerReference {
	return metav1.NewControllerRef(p, v1alpha1.SchemeGroupVersion.WithKind("Placement"))
}

// statusOf is the status a Placement should have, given its outcome: conditions keep their
// transition times while their status holds.
func statusOf(p *v1alpha1.Placement, o outcome, now time.Time) v1alpha1.PlacementStatus {
	st := *p.Status.DeepCopy()
	st.ObservedGeneration = o.generation
	st.DecisionKey = p.Name
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg,
			ObservedGeneration: o.generation, LastTransitionTime: metav1.NewTime(now)})
	}
	if o.invalid != nil {
		set(v1alpha1.PlacementMisconfigured, metav1.ConditionTrue, v1alpha1.ReasonInvalidPolicy,
			safetext.OneLine(o.invalid.Error(), 1000)+"; the decision last written is kept")
		if meta.FindStatusCondition(st.Conditions, v1alpha1.PlacementSatisfied) == nil {
			set(v1alpha1.PlacementSatisfied, metav1.ConditionUnknown, v1alpha1.ReasonNotDecided, "the policy cannot be used")
		}
		return st
	}
	set(v1alpha1.PlacementMisconfigured, metav1.ConditionFalse, v1alpha1.ReasonValidPolicy, "the policy compiles")
	if o.failed != nil {
		set(v1alpha1.PlacementSatisfied, metav1.ConditionFalse, v1alpha1.ReasonDecisionNotWritten,
			safetext.OneLine(o.failed.Error(), 1000)+"; retrying")
		return st
	}
	d := o.decided
	if !o.lastRebalance.IsZero() {
		st.LastRebalanceTime = ptr.To(metav1.NewTime(o.lastRebalance).Rfc3339Copy()) // as it reads back: no write when unchanged
	}
	counts := map[string]int32{}
	for _, e := range d.Explanations {
		counts[writtenReason(e.Reason)]++
	}
	st.Candidates = st.Candidates[:0]
	for r, n := range counts {
		st.Candidates = append(st.Candidates, v1alpha1.PlacementReasonCount{Reason: r, Count: n})
	}
	slices.SortFunc(st.Candidates, func(a, b v1alpha1.PlacementReasonCount) int { return cmp.Compare(a.Reason, b.Reason) })
	if len(st.Candidates) == 0 {
		st.Candidates = nil
	}
	st.Chosen = int32(len(d.Chosen))
	st.Scores = scoresOf(p.Status.Scores, d)
	switch {
	case d.Satisfied && p.Spec.Count != nil:
		set(v1alpha1.PlacementSatisfied, metav1.ConditionTrue, v1alpha1.ReasonSatisfied, fmt.Sprintf("%d of %d chosen", st.Chosen, *p.Spec.Count))
	case d.Satisfied:
		set(v1alpha1.PlacementSatisfied, metav1.ConditionTrue, v1alpha1.ReasonSatisfied, fmt.Sprintf("%d chosen: every fitting candidate", st.Chosen))
	default:
		var out []string
		for _, c := range st.Candidates {
			if !placement.Reason(c.Reason).Chosen() {
				out = append(out, fmt.Sprintf("%s %d", c.Reason, c.Count))
			}
		}
		msg := fmt.Sprintf("%d of %d chosen", st.Chosen, ptrValue(p.Spec.Count))
		if len(out) > 0 {
			msg += "; the others are out: " + strings.Join(out, ", ") + " (clusterregistry explain-placement " + p.Name + " says why, one by one)"
		} else {
			msg += "; no other candidate"
		}
		if counts[string(placement.ReasonResourcesUnknown)] > 0 {
			msg += "; members without status.resources cannot be judged by fit or prefer: run a capacity controller (clusterregistry controllers --controllers capacity)"
		}
		set(v1alpha1.PlacementSatisfied, metav1.ConditionFalse, v1alpha1.ReasonNotEnoughCandidates, msg)
	}
	return st
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// PlacementDecisionCRDManifest is where SIG Multicluster's PlacementDecision CRD comes from:
// decision.CRDManifest, kept here for callers of earlier versions.
const PlacementDecisionCRDManifest = decision.CRDManifest

// Served returns nil when the registry that d asks serves both Placements and
// PlacementDecisions; otherwise an error that says which is missing and what to install. A
// Controller without them could only log a failed watch or write, again and again.
func Served(d discovery.DiscoveryInterface) error {
	return served.Require(d,
		served.API{GroupVersion: v1alpha1.SchemeGroupVersion.String(), Resource: "placements",
			Install: "install the registry's CRDs with `clusterregistry install` (schema version 5 or later)"},
		served.API{GroupVersion: cpv1alpha1.GroupVersion.String(), Resource: "placementdecisions", Install: "kubectl apply -f " + PlacementDecisionCRDManifest})
}
