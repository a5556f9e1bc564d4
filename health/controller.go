package health

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/election"
	"github.com/cluster-registry/sdk/internal/reconcilequeue"
	"github.com/cluster-registry/sdk/multicluster"
)

// Controller probes the members of a registry and writes their status. Make one with New and
// start it with Run.
type Controller struct {
	opts    Options
	writer  *writer
	metrics *metrics

	// sweeping is true while a sweep (markUnprobed) writes; sweeps waits for it to finish.
	sweeping atomic.Bool
	sweeps   sync.WaitGroup

	mu      sync.Mutex
	members map[types.NamespacedName]*tracked
	// probes holds each member's next probe, keyed by member, and writes the members whose
	// status write waits for a writer (tracked.pending), so that no probe waits for the
	// registry: when the registry is slow, probes that waited for their writes fell behind, and
	// members probed late were each due a heartbeat write, which slowed the registry further.
	// Each is the queue of a controller-runtime controller (probeLoop, writeLoop: "health" and
	// "health-writes"), so that a member is never probed, or written, twice at once, and their
	// depth, latency and reconciles are controller-runtime's usual metrics. One Run's.
	probes, writes       *reconcilequeue.Queue
	probeLoop, writeLoop controller.TypedController[reconcile.Request]
	// keptClients are the members' probe clients with KeepConnections (*multicluster.Member to
	// *keptClient); see clientFor.
	keptClients sync.Map
}

// tracked is one member, when its next probe is due, and its state.
type tracked struct {
	member *multicluster.Member
	// next is when the member's next probe is due: a queued key that comes out earlier (left by
	// a reschedule) is dropped.
	next  time.Time
	gone  bool
	added time.Time // when the controller began to track it
	// identified is when a probe last read the member's version and identity; unidentified is
	// true when a probe opened a connection that no probe has identified since.
	identified   time.Time
	unidentified bool
	// probing is when the probe in flight began; zero when none is.
	probing time.Time
	state   memberState
	// pending is the status write waiting for a writer, nil when none is. state records it as
	// written as soon as it is queued, so that the next probe decides against it; confirmed is
	// what the registry was last written (or adopted) with, which state goes back to if the
	// write fails, so that the next probe writes again.
	pending   *statusWrite
	confirmed writtenStatus
	// writing is true while a writer makes the member's queued write: a probe meanwhile queues
	// its own, so that the member's writes are made one at a time, in the order of its probes.
	writing bool
}

// statusWrite is a member's newest verdict waiting to be written, and the probe it came from.
type statusWrite struct {
	v      verdict
	probed time.Time
}

// identify reports whether the next probe must read the version and identity, whatever
// connection it uses: the connection is unidentified, or the heartbeat is due.
func (t *tracked) identify(now time.Time, heartbeat time.Duration) bool {
	return t.unidentified || now.Sub(t.identified) >= heartbeat
}

// observed records what a probe that began at start learned of the member's connection.
func (t *tracked) observed(o observation, start time.Time) {
	switch {
	case o.identified:
		t.identified, t.unidentified = start, false
	case o.opened:
		t.unidentified = true
	}
}

// New checks opts and returns a Controller.
func New(opts Options) (*Controller, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	m, err := newMetrics(o.Metrics)
	if err != nil {
		return nil, fmt.Errorf("health: registering metrics: %w", err)
	}
	return &Controller{
		opts:    o,
		metrics: m,
		members: map[types.NamespacedName]*tracked{},
	}, nil
}

// ErrLostLeadership is Run's error when the controller was the leader and could no longer renew
// its Lease: another replica may write now, so this one stops. Restart it to contend again. It is
// election.ErrLostLeadership, whichever controller lost.
var ErrLostLeadership = election.ErrLostLeadership

// Run probes members until ctx ends, then waits for its goroutines and returns ctx's error. It
// returns an error at once if the registry's Clusters cannot be listed. With LeaderElection, it
// first waits to hold the Lease, and returns ErrLostLeadership if it loses it.
func (c *Controller) Run(ctx context.Context) error {
	le := c.opts.LeaderElection
	namespaces := c.opts.Namespaces
	switch {
	case c.opts.Members != nil:
		namespaces = []string{"(those of Options.Members)"}
	case len(namespaces) == 0:
		namespaces = []string{"(all)"}
	}
	selector := "(all)"
	if c.opts.Selector != nil && !c.opts.Selector.Empty() {
		selector = c.opts.Selector.String()
	}
	leading := "off"
	if le != nil {
		leading = le.Namespace + "/" + le.Name + " as " + le.Identity
	}
	c.opts.Logger.Info("starting", "namespaces", namespaces, "selector", selector, "interval", c.opts.Interval.String(),
		"timeout", c.opts.Timeout.String(), "keepConnections", c.opts.KeepConnections, "leaderElection", leading)
	if le == nil {
		return c.run(ctx)
	}
	err := election.Run(ctx, c.opts.Kube.CoordinationV1(), *le, c.opts.Logger, c.run)
	return err
}

// run is Run without election.
func (c *Controller) run(ctx context.Context) error {
	w, err := newWriter(ctx, &c.opts)
	if err != nil {
		return err
	}
	c.writer = w
	defer w.shutdown()
	if err := c.loops(); err != nil {
		return err
	}
	members, stop, err := c.source(ctx)
	if err != nil {
		return err
	}
	defer stop()
	unsubscribe := members.Subscribe(c.onMembership)
	defer unsubscribe()
	err = c.work(ctx)
	c.sweeps.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// loops makes a Run's queues and the controllers that work them: Concurrency probes at a time,
// and a quarter as many status writes (writers).
func (c *Controller) loops() error {
	probes, writes := &reconcilequeue.Queue{}, &reconcilequeue.Queue{}
	probeLoop, err := newLoop("health", c.opts.Concurrency, probes, c.opts, reconcile.Func(c.reconcileProbe))
	if err != nil {
		return err
	}
	writeLoop, err := newLoop("health-writes", writers(c.opts.Concurrency), writes, c.opts, reconcile.Func(c.reconcileWrite))
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.probes, c.writes, c.probeLoop, c.writeLoop = probes, writes, probeLoop, writeLoop
	return nil
}

// newLoop is a controller-runtime controller of name that reconciles keys from q, workers at a
// time. Its errors are never returned (a probe's failure is the member's status), so its rate
// limiter never delays a key.
func newLoop(name string, workers int, q *reconcilequeue.Queue, opts Options, r reconcile.TypedReconciler[reconcile.Request]) (controller.TypedController[reconcile.Request], error) {
	ctrl, err := controller.NewTypedUnmanaged(name, controller.TypedOptions[reconcile.Request]{
		Reconciler: r, MaxConcurrentReconciles: workers, SkipNameValidation: ptr.To(true), Logger: opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	if err := ctrl.Watch(q.Source()); err != nil {
		return nil, fmt.Errorf("health: %w", err)
	}
	return ctrl, nil
}

// source is Options.Members, or else a Fleet of the controller's own, started; stop stops what
// members started.
func (c *Controller) source(ctx context.Context) (multicluster.MemberSource, func(), error) {
	if c.opts.Members != nil {
		return c.opts.Members, func() {}, nil
	}
	fleet := multicluster.NewFleet(c.opts.Registry, c.opts.Resolver, multicluster.FleetOptions{
		Namespaces: c.opts.Namespaces, Selector: c.opts.Selector,
	})
	if err := fleet.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("health: %w", err)
	}
	return fleet, fleet.Stop, nil
}

// onMembership follows the Fleet: a new member is probed within one interval, at a random tick
// of it so that a fleet's probes spread out; a member whose endpoints changed is probed at once.
func (c *Controller) onMembership(ev multicluster.MemberEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := ev.Member.Name()
	switch ev.Type {
	case multicluster.MemberAdded:
		t := &tracked{member: ev.Member, added: time.Now()}
		c.members[key] = t
		c.scheduleOnTick(t, time.Now().Add(time.Duration(rand.Int64N(int64(c.opts.Interval)))))
	case multicluster.MemberReachChanged:
		// A probe in flight goes on, and schedules the next as usual.
		if t := c.members[key]; t != nil && t.probing.IsZero() {
			c.schedule(t, time.Now())
		}
	case multicluster.MemberRemoved:
		if t := c.members[key]; t != nil {
			t.gone = true // its queued key is dropped when it comes out
			delete(c.members, key)
			c.keptClients.Delete(t.member)
			c.metrics.setReason(key, "")
			c.metrics.setExpiry(key, time.Time{})
		}
	}
}

// schedule makes t's next probe due at next; c.mu is held. A key already queued for sooner
// comes out then, and goes back until t.next (reconcileProbe).
func (c *Controller) schedule(t *tracked, next time.Time) {
	t.next = next
	c.probes.AddAfter(t.member.Name(), time.Until(next))
}

// work probes due members, Concurrency at a time, writes their statuses, a quarter as many at a
// time, and marks members that have gone unprobed too long, until ctx ends; then it waits for
// its workers. An idle member costs a queued key, not a goroutine.
func (c *Controller) work(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.probeLoop.Start(ctx) })
	g.Go(func() error { return c.writeLoop.Start(ctx) })
	// The sweep has a goroutine of its own: when every worker is busy, the members waiting are
	// what it is for.
	g.Go(func() error {
		sweep := time.NewTicker(c.opts.Interval)
		defer sweep.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-sweep.C:
				c.sweep(ctx)
			}
		}
	})
	return g.Wait()
}

// writers is how many status writes are made at once for probes made concurrency at a time. A
// member's status is written only when it changes and at its heartbeat, so that writes are
// usually fewer than probes. When a whole fleet changes at once (the first pass, an outage) each
// probe writes, and the registry is the limit: as many writers as workers made the default
// mode's first pass faster (103 s against 125 in BenchmarkHealth), but three replicas of a shard
// group, each with 64 writers, kept the registry so busy that their Leases were renewed late and
// members changed hands in the steady state (BenchmarkShardedHealth: 3,451 members probed by two
// replicas in a minute, against none with a quarter as many).
func writers(concurrency int) int { return max(1, concurrency/4) }

// reconcileProbe probes req's member if it is still tracked and due. A queue keeps one time per
// key, the sooner, so a key may come out before its member's time: a removed member's, left in
// the queue, is dropped; one of a member removed and added again, whose new time is later, goes
// back until then.
func (c *Controller) reconcileProbe(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if t := c.due(req.NamespacedName); t != nil {
		if ctx.Err() == nil {
			c.probeAndWrite(ctx, t)
		}
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: c.untilDue(req.NamespacedName)}, nil
}

// untilDue is how long until key's member is due; 0 when it is not tracked.
func (c *Controller) untilDue(key types.NamespacedName) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.members[key]; t != nil {
		return max(time.Until(t.next), 0)
	}
	return 0
}

// due is key's member if it is tracked and its probe is due; nil for a key left in the queue by a
// reschedule or a removal.
func (c *Controller) due(key types.NamespacedName) *tracked {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.members[key]; t != nil && !time.Now().Before(t.next) {
		return t
	}
	return nil
}

// probeAndWrite probes one member, writes its status if that changes it, and schedules the next
// probe one interval (jittered by a tenth) after this one began, on the tick after that.
func (c *Controller) probeAndWrite(ctx context.Context, t *tracked) {
	start := time.Now()
	o, v, _, _, ok := c.probeWrite(ctx, t, start, true)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.gone {
		c.metrics.setReason(t.member.Name(), v.condition.Reason)
		c.metrics.setExpiry(t.member.Name(), o.expires)
		jitter := time.Duration(rand.Int64N(int64(c.opts.Interval)/5+1)) - c.opts.Interval/10
		c.scheduleOnTick(t, start.Add(c.opts.Interval+jitter))
	}
}

// probeWrite probes one member and writes its status if that changes it (or the heartbeat is due),
// or with queue, queues the write for a writer (reconcileWrite) unless it is urgent, the writes are
// backlogged (writesBacklogged), and none of the member's is queued or being made. It returns
// what the probe observed, the verdict, whether it wrote and why writing failed; ok is false
// when ctx ended or the member left meanwhile.
func (c *Controller) probeWrite(ctx context.Context, t *tracked, start time.Time, queue bool) (o observation, v verdict, wrote bool, werr error, ok bool) {
	c.mu.Lock()
	identify := t.identify(start, c.opts.Heartbeat)
	t.probing = start
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		t.probing = time.Time{}
		c.mu.Unlock()
	}()
	o = c.probe(ctx, t.member, identify)
	c.metrics.observeProbe(o.reason, time.Since(start))
	if log := c.opts.Logger.V(1); log.Enabled() { // not even the arguments at the default level
		log.Info("probed", "cluster", t.member.String(), "reason", o.reason, "duration", time.Since(start))
	}
	if ctx.Err() != nil {
		return o, v, false, nil, false
	}
	c.mu.Lock()
	if t.gone {
		c.mu.Unlock()
		return o, v, false, nil, false
	}
	t.observed(o, start)
	adopting := t.state.written == nil
	v = t.state.decide(t.member.Cluster(), o, &c.opts, start)
	if v.condition.Reason == v1alpha1.ReasonIdentityChanged {
		t.unidentified = true // every probe reads the identity until the recorded one answers
	}
	if adopting && t.state.written != nil { // the status the registry had, taken as written
		t.confirmed = t.state.writtenStatus
	}
	write := t.state.needsWrite(v, c.opts.Heartbeat, start)
	previous := t.state.written
	if write && queue && (t.pending != nil || t.writing || !c.urgent(v, t.state.lastWrite, start) || !c.writesBacklogged()) {
		if t.pending == nil {
			c.writes.Add(t.member.Name())
		}
		t.pending = &statusWrite{v: v, probed: start} // a newer verdict replaces one not yet written
		t.state.wrote(v, start)
		c.mu.Unlock()
		return o, v, false, nil, true
	}
	c.mu.Unlock()

	if write {
		if werr = c.writer.apply(ctx, t.member.Cluster(), v, start); werr != nil {
			c.opts.Logger.Error(werr, "writing status", "cluster", t.member.String())
		} else {
			wrote = true
			c.mu.Lock()
			t.state.wrote(v, start)
			t.confirmed = t.state.writtenStatus
			c.mu.Unlock()
			if v.transition {
				c.writer.event(t.member.Cluster(), previous, v.condition)
				c.opts.Logger.Info("Ready changed", "cluster", t.member.String(), "status", v.condition.Status, "reason", v.condition.Reason)
			}
		}
	}
	return o, v, wrote, werr, true
}

// urgent reports whether a status write changes what the registry's readers see: Ready changes
// (or is written for the first time), or the status was last written more than two heartbeats
// ago (a restarted controller adopting statuses that went stale meanwhile). A heartbeat due on
// time is not urgent.
func (c *Controller) urgent(v verdict, lastWrite, now time.Time) bool {
	return v.transition || now.Sub(lastWrite) >= 2*c.opts.Heartbeat
}

// writesBacklogged reports whether more status writes wait than there are probe workers. An
// urgent write then is made by the probe's worker, in line, beside the writers: when a fleet's
// status changes at once (the first pass, an outage) the burst is written as fast as the
// registry takes it, where writers alone (a quarter of the workers) took twice as long
// (BenchmarkHealth's first pass: 110-125 s against 51-72). Heartbeats always wait for the
// writers, so that a registry too slow for them delays no probe: when workers wrote them too,
// the members they left unprobed were each due a heartbeat, and probes fell to a quarter.
func (c *Controller) writesBacklogged() bool { return c.writes.Len() > c.opts.Concurrency }

// reconcileWrite writes the newest verdict of a member whose status write is queued. A member's
// writes are made one at a time (the queue hands out a key once until it is done), in the order
// of its probes. A failed write puts the
// member's state back to what the registry holds, so that its next probe writes again, unless a
// newer verdict is queued meanwhile, which is written instead.
func (c *Controller) reconcileWrite(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	c.write(ctx, req.NamespacedName)
	return reconcile.Result{}, nil
}

// write writes key's newest queued verdict.
func (c *Controller) write(ctx context.Context, key types.NamespacedName) {
	c.mu.Lock()
	t := c.members[key]
	if t == nil { // gone: nothing to write
		c.mu.Unlock()
		return
	}
	p := t.pending
	t.pending = nil
	// A verdict decided against a write still queued may say the registry's condition again
	// (Ready flapped and came back before the writes were made): it keeps the registry's
	// transition time, as it would have had the writes been made at once (the status's, whatever
	// the reason: see accept).
	if prev := t.confirmed.written; p != nil && prev != nil && prev.Status == p.v.condition.Status {
		p.v.condition.LastTransitionTime = prev.LastTransitionTime
	}
	if p == nil || ctx.Err() != nil {
		c.mu.Unlock()
		return
	}
	t.writing = true
	c.mu.Unlock()
	err := c.writer.apply(ctx, t.member.Cluster(), p.v, p.probed)
	c.mu.Lock()
	t.writing = false
	previous := t.confirmed.written
	if err != nil {
		if t.pending == nil {
			t.state.writtenStatus = t.confirmed
		}
		c.mu.Unlock()
		if ctx.Err() == nil {
			c.opts.Logger.Error(err, "writing status", "cluster", t.member.String())
		}
		return
	}
	cond := p.v.condition
	t.confirmed = writtenStatus{written: &cond, version: p.v.version, clusterID: p.v.clusterID, expires: p.v.expires, lastWrite: p.probed}
	if t.pending == nil {
		t.state.writtenStatus = t.confirmed // as written, transition time included
	}
	c.mu.Unlock()
	if previous == nil || previous.Status != cond.Status || previous.Reason != cond.Reason {
		c.writer.event(t.member.Cluster(), previous, cond)
		c.opts.Logger.Info("Ready changed", "cluster", t.member.String(), "status", cond.Status, "reason", cond.Reason)
	}
}

// sweep starts markUnprobed in a goroutine of its own, unless the last sweep is still writing.
// The dispatcher must not wait for it: when probes fall behind, a sweep writes a status for
// every member left waiting, one write at a time, and a dispatcher that waited dispatched
// nothing meanwhile, so that more members fell behind for the next sweep to write.
func (c *Controller) sweep(ctx context.Context) {
	if !c.sweeping.CompareAndSwap(false, true) {
		return
	}
	c.sweeps.Go(func() {
		defer c.sweeping.Store(false)
		c.markUnprobed(ctx)
	})
}

// unprobedSince is when t was last probed, or began to be tracked. A probe in flight counts as
// probed: a member whose probes take longer than a few intervals (a --probe-timeout much longer
// than --interval, and a member that does not answer) is being probed all the time, and marking
// it NotProbed between its Unreachable verdicts made its status flap. c.mu is held.
func (c *Controller) unprobedSince(t *tracked) time.Time {
	since := t.state.lastProbe
	if since.IsZero() {
		since = t.added
	}
	if t.probing.After(since) {
		since = t.probing
	}
	return since
}

// stale reports whether t was last probed more than UnknownAfter before now and its status does
// not say so yet. c.mu is held.
func (c *Controller) stale(t *tracked, now time.Time) bool {
	return !t.gone && now.Sub(c.unprobedSince(t)) > c.opts.UnknownAfter &&
		(t.state.written == nil || t.state.written.Reason != notProbed.Reason)
}

// markUnprobed turns Ready Unknown, reason NotProbed, for members not probed for UnknownAfter:
// when probes fall behind, the status says so instead of standing stale.
func (c *Controller) markUnprobed(ctx context.Context) {
	now := time.Now()
	var stale []*tracked
	c.mu.Lock()
	for _, t := range c.members {
		if c.stale(t, now) {
			stale = append(stale, t)
		}
	}
	c.mu.Unlock()
	for _, t := range stale {
		if ctx.Err() != nil {
			return
		}
		// Probes go on while the sweep writes: one may have caught up with this member.
		c.mu.Lock()
		now := time.Now()
		still, last := c.stale(t, now), c.unprobedSince(t)
		c.mu.Unlock()
		if !still {
			continue
		}
		current := t.member.Cluster()
		v := verdict{condition: notProbed, transition: true, version: current.Status.Version, clusterID: current.Status.ClusterID}
		if t := current.Status.CredentialsExpireAt; t != nil {
			v.expires = t.Time
		}
		v.condition.Message = fmt.Sprintf("not probed for %s", since(now, last))
		v.condition.LastTransitionTime = metav1.NewTime(now)
		probed := now
		if p := current.Status.LastProbeTime; p != nil {
			probed = p.Time // the last probe is what it was
		}
		if err := c.writer.apply(ctx, current, v, probed); err == nil {
			c.mu.Lock()
			previous := t.state.written
			t.state.wrote(v, now)
			t.confirmed = t.state.writtenStatus
			c.mu.Unlock()
			c.writer.event(t.member.Cluster(), previous, v.condition)
		}
	}
}
