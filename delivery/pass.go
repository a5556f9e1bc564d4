package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
)

// A pass over a Release: read it, plan from a snapshot, act on the plan, report (plan.go
// decides; this file gathers what it decides from and runs what it says).

// reconcile brings one Release's members one step closer to its spec, and says when to look
// again if nothing else calls. Every way through a pass comes to one result, which finish
// reports: status is written there alone.
func (c *Controller) reconcile(ctx context.Context, key types.NamespacedName) (time.Duration, error) {
	if !c.ledSet(key) {
		return 0, nil // another controller of the set leads; this one is called when it does (setLeases.led)
	}
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
	var r result
	switch {
	case rel.DeletionTimestamp != nil:
		r = c.finalize(ctx, rel, st, ownsRelease)
	case !slices.Contains(rel.Finalizers, Finalizer):
		r = c.addFinalizer(ctx, rel, ownsRelease)
	default:
		r = c.present(ctx, rel, st, ownsRelease)
	}
	return c.finish(ctx, rel, st, r)
}

// addFinalizer puts the Finalizer on a Release its owner has not yet taken; the update brings
// the Release back to the queue.
func (c *Controller) addFinalizer(ctx context.Context, rel *v1alpha1.Release, ownsRelease bool) result {
	if !ownsRelease {
		return result{} // the Release's owner adds it, and the update brings it back here
	}
	rel = rel.DeepCopy()
	rel.Finalizers = append(rel.Finalizers, Finalizer)
	c.writes.Add(1)
	_, err := c.registry.ClusterregistryV1alpha1().Releases(rel.Namespace).Update(ctx, rel, metav1.UpdateOptions{})
	return result{err: err}
}

// present is a pass over a Release that is not being deleted: its rules and inputs, its render, and its delivery.
func (c *Controller) present(ctx context.Context, rel *v1alpha1.Release, st *releaseState, ownsRelease bool) result {
	if rel.Spec.Suspend {
		return stalled(nil, nil, 0, "Suspended", "spec.suspend is true: nothing is applied or removed")
	}
	rules, invalid, err := compileRules(rel)
	if err != nil {
		return stalled(nil, nil, 0, invalid, err.Error())
	}
	c.setRules(st, rules)
	in, recheck, stall := c.src.inputs(ctx, rel)
	r := result{requeue: c.opts.RetryAfter, status: stall}
	if stall == nil {
		bundle, err := Render(rel, in)
		oe, de := (*OverrideError)(nil), (*DivisionError)(nil)
		switch {
		case errors.As(err, &oe):
			r = stalled(nil, nil, 0, "InvalidOverride", err.Error())
		case errors.As(err, &de):
			r = stalled(nil, nil, 0, "InvalidDivision", err.Error())
		case err != nil:
			r = stalled(nil, nil, 0, "InvalidSource", err.Error())
		default:
			r = c.deliver(ctx, rel, st, bundle, ownsRelease)
		}
	}
	// A Ready Release comes back at least every Recheck (recheck.go).
	r.recheck = pick(recheck, c.opts.Recheck)
	return r
}

// deliver is a pass over a rendered Release: plan from a snapshot, act on the plan, and report
// the status from a plan of what the acts left.
func (c *Controller) deliver(ctx context.Context, rel *v1alpha1.Release, st *releaseState, bundle *Bundle, ownsRelease bool) result {
	dec, err := c.decision(rel)
	var unavailable *decisionsUnavailableError
	switch {
	case errors.As(err, &unavailable):
		// Looked at again: the informer lists again by itself, and nothing calls when it does.
		return stalled(bundle, nil, c.opts.RetryAfter, "DecisionsUnavailable", err.Error())
	case err != nil:
		return stalled(bundle, nil, 0, "DecisionNotFound", err.Error())
	}
	if cycle := c.dependencyCycle(rel); cycle != "" {
		return stalled(bundle, dec, c.opts.RetryAfter, "DependencyCycle",
			"spec.dependsOn makes a cycle: "+cycle+"; nothing of it is applied until one of them stops depending on the next")
	}
	if missing := c.missingDependencies(rel); len(missing) > 0 {
		return stalled(bundle, dec, c.opts.RetryAfter, "DependencyNotFound",
			fmt.Sprintf("spec.dependsOn names %s, which cluster set %s does not have: nothing is applied until it is created, or removed from spec.dependsOn (a Release depends only on Releases of its own set)",
				strings.Join(missing, ", "), rel.Namespace))
	}
	if err := bundle.capacityBound(len(dec.Clusters)); err != nil {
		return stalled(bundle, dec, c.opts.RetryAfter, "InvalidDivision", err.Error())
	}
	c.shareWith(rel, st, bundle.Revision, ownsRelease)
	g := gatesOf(rel, len(dec.Clusters), c.opts.RetryAfter)
	g.approved = Approved(rel, bundle.Revision)
	target := target{bundle: bundle, waves: Waves(dec.Clusters, dec.Groups, rel.Spec.Rollout), gates: g}
	back, err := c.rollingBack(ctx, rel, bundle, target)
	if err != nil {
		return stalled(bundle, dec, c.opts.RetryAfter, "RollbackFailed", err.Error())
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

// pass plans from a snapshot and acts on the plan; its result reports a plan of what the acts
// left.
func (c *Controller) pass(ctx context.Context, rel *v1alpha1.Release, st *releaseState, dec *decision.Decision, t target, ownsRelease bool) result {
	byName := c.memberIndex()
	c.mu.Lock()
	plans := maps.Clone(st.plans) // divided outside the lock, kept under it
	c.mu.Unlock()
	if plans == nil {
		plans = map[string]v1alpha1.ReleaseDivisionStatus{}
	}
	t.bundle = t.bundle.dividedWith(dec.Clusters, func(k types.NamespacedName) *v1alpha1.Cluster { return c.clusterOf(k, byName) }, plans, time.Now())
	c.mu.Lock()
	st.plans = plans
	c.mu.Unlock()
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
	recordSettled(st, p)
	c.mu.Unlock()
	wait := p.wait
	if p.remove, wait = c.confirmDeliberate(ctx, snap, p.remove, wait); len(p.apply) > 0 || len(p.remove) > 0 {
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
	r := result{bundle: t.bundle, dec: dec, requeue: wait, owner: ownsRelease, status: &progress{snap: &snap, plan: &p}}
	switch pr := r.status; {
	case t.stall != nil:
		pr.stalledReason, pr.stalledMessage = t.stall.stalledReason, t.stall.stalledMessage
	case p.held:
		pr.stalledReason = "EmptyDecision"
		pr.stalledMessage = fmt.Sprintf("the decision names no member: nothing is removed from the %d members that have the Release's objects; delete the Release to remove them", len(snap.own))
	case p.stopped && rel.Spec.Rollout != nil && rel.Spec.Rollout.OnFailure == v1alpha1.FailureRollback:
		if c.lastComplete(rel, t.bundle.Revision) == nil {
			pr.note = "onFailure is Rollback, but no earlier revision was Ready everywhere: there is nothing to roll back to"
			if rel.Status.LastCompleteRevision == t.bundle.Revision {
				pr.note = "onFailure is Rollback, but this revision was Ready everywhere once: a revision that completed is not rolled back"
			}
			break
		}
		// The Release's owner records the rollback; another replica follows it.
		r.rollback = ownsRelease
	}
	r.recordStop = p.stopped && ownsRelease && t.stall == nil && !r.rollback
	return r
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
		if b != nil && len(b.overrides) == 0 && len(b.divisions) == 0 {
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
		w := want(k)
		if cl := c.clusterOf(k, byName); !named[k] && cl != nil && b != nil {
			w = b.revisionKept(cl, ms.shares) // a member that left runs the share it had
		}
		s.own[k] = viewOf(ms, revision, w)
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
