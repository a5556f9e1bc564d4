package health

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/internal/leader"
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
	queue   probeQueue
	wake    chan struct{}
}

// tracked is one member, its place in the probe queue and its state.
type tracked struct {
	member *multicluster.Member
	next   time.Time
	index  int // in the queue; -1 when out of it (being probed, or removed)
	gone   bool
	added  time.Time // when the controller began to track it
	// identified is when a probe last read the member's version and identity; unidentified is
	// true when a probe opened a connection that no probe has identified since.
	identified   time.Time
	unidentified bool
	// probing is when the probe in flight began; zero when none is.
	probing time.Time
	state   memberState
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
		wake:    make(chan struct{}, 1),
	}, nil
}

// ErrLostLeadership is Run's error when the controller was the leader and could no longer renew
// its Lease: another replica may write now, so this one stops. Restart it to contend again.
var ErrLostLeadership = errors.New("health: lost the leader election")

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
	err := leader.Run(ctx, c.opts.Kube.CoordinationV1(), leader.Lease(*le), c.opts.Logger, c.run)
	if errors.Is(err, leader.ErrLost) {
		return ErrLostLeadership
	}
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
	members, stop, err := c.source(ctx)
	if err != nil {
		return err
	}
	defer stop()
	unsubscribe := members.Subscribe(c.onMembership)
	defer unsubscribe()

	work := make(chan *tracked)
	var wg sync.WaitGroup
	for range c.opts.Concurrency {
		wg.Go(func() {
			for t := range work {
				c.probeAndWrite(ctx, t)
			}
		})
	}
	c.dispatch(ctx, work)
	close(work)
	wg.Wait()
	c.sweeps.Wait()
	return ctx.Err()
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

// onMembership follows the Fleet: a new member is probed within one interval, at a random point
// of it so that a fleet's probes spread out; a member whose endpoints changed is probed at once.
func (c *Controller) onMembership(ev multicluster.MemberEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := ev.Member.Name()
	switch ev.Type {
	case multicluster.MemberAdded:
		t := &tracked{member: ev.Member, index: -1, added: time.Now()}
		c.members[key] = t
		c.schedule(t, time.Now().Add(time.Duration(rand.Int64N(int64(c.opts.Interval)))))
	case multicluster.MemberReachChanged:
		if t := c.members[key]; t != nil && t.index >= 0 {
			t.next = time.Now()
			heap.Fix(&c.queue, t.index)
		}
	case multicluster.MemberRemoved:
		if t := c.members[key]; t != nil {
			t.gone = true
			if t.index >= 0 {
				heap.Remove(&c.queue, t.index)
			}
			delete(c.members, key)
			c.metrics.setReason(key, "")
			c.metrics.setExpiry(key, time.Time{})
		}
	}
	c.signal()
}

// schedule puts t in the queue at next; c.mu is held.
func (c *Controller) schedule(t *tracked, next time.Time) {
	t.next = next
	heap.Push(&c.queue, t)
}

func (c *Controller) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// dispatch hands due members to the workers until ctx ends, and marks members that have gone
// unprobed too long. It is the only goroutine that waits on time; an idle member costs a queue
// entry, not a goroutine.
func (c *Controller) dispatch(ctx context.Context, work chan<- *tracked) {
	sweep := time.NewTicker(c.opts.Interval)
	defer sweep.Stop()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		c.mu.Lock()
		var due *tracked
		wait := time.Hour
		if len(c.queue) > 0 {
			if d := time.Until(c.queue[0].next); d <= 0 {
				due = heap.Pop(&c.queue).(*tracked)
			} else {
				wait = d
			}
		}
		c.mu.Unlock()
		if due != nil {
			for sent := false; !sent; {
				select {
				case work <- due:
					sent = true
				case <-sweep.C: // every worker busy: the members waiting are what the sweep is for
					c.sweep(ctx)
				case <-ctx.Done():
					return
				}
			}
			continue // the next may be due too
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-c.wake:
		case <-timer.C:
		case <-sweep.C:
			c.sweep(ctx)
		}
	}
}

// probeAndWrite probes one member, writes its status if that changes it, and schedules the next
// probe one interval (jittered by a tenth) after this one began.
func (c *Controller) probeAndWrite(ctx context.Context, t *tracked) {
	start := time.Now()
	o, v, _, _, ok := c.probeWrite(ctx, t, start)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !t.gone {
		c.metrics.setReason(t.member.Name(), v.condition.Reason)
		c.metrics.setExpiry(t.member.Name(), o.expires)
		jitter := time.Duration(rand.Int64N(int64(c.opts.Interval)/5+1)) - c.opts.Interval/10
		c.schedule(t, start.Add(c.opts.Interval+jitter))
		c.signal()
	}
}

// probeWrite probes one member and writes its status if that changes it (or the heartbeat is due):
// what the probe observed, the verdict, whether it wrote and why writing failed; ok is false when
// ctx ended or the member left meanwhile.
func (c *Controller) probeWrite(ctx context.Context, t *tracked, start time.Time) (o observation, v verdict, wrote bool, werr error, ok bool) {
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
	v = t.state.decide(t.member.Cluster(), o, &c.opts, start)
	write := t.state.needsWrite(v, c.opts.Heartbeat, start)
	previous := t.state.written
	c.mu.Unlock()

	if write {
		if werr = c.writer.apply(ctx, t.member.Cluster(), v, start); werr != nil {
			c.opts.Logger.Error(werr, "writing status", "cluster", t.member.String())
		} else {
			wrote = true
			c.mu.Lock()
			t.state.wrote(v, start)
			c.mu.Unlock()
			if v.transition {
				c.writer.event(t.member.Cluster(), previous, v.condition)
				c.opts.Logger.Info("Ready changed", "cluster", t.member.String(), "status", v.condition.Status, "reason", v.condition.Reason)
			}
		}
	}
	return o, v, wrote, werr, true
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
			c.mu.Unlock()
			c.writer.event(t.member.Cluster(), previous, v.condition)
		}
	}
}

// probeQueue orders members by their next probe.
type probeQueue []*tracked

func (q probeQueue) Len() int           { return len(q) }
func (q probeQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q probeQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *probeQueue) Push(x any) {
	t := x.(*tracked)
	t.index = len(*q)
	*q = append(*q, t)
}
func (q *probeQueue) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	t.index = -1
	return t
}
