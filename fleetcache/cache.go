package fleetcache

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/multicluster"
)

// Members is where a Cache learns its members: a *multicluster.Fleet, whose options (namespaces,
// label selector) choose the members.
type Members interface {
	Members() []*multicluster.Member
	Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func())
}

// Cache keeps watch caches of the kinds that Typed, Dynamic and Metadata ask for, on every member
// of a Fleet. Make one with New; it is safe for concurrent use.
type Cache struct {
	members Members

	mu      sync.Mutex
	running *running
	caches  map[types.NamespacedName]*memberCaches
	kinds   map[kindID]kindRunner
}

// running is one Start's subscription.
type running struct {
	ctx         context.Context
	cancel      context.CancelFunc
	unsubscribe func()
}

// New returns a Cache of the members of members, usually a *multicluster.Fleet. Ask for kinds
// with Typed, Dynamic or Metadata, before or after Start.
func New(members Members) *Cache {
	return &Cache{members: members, caches: map[types.NamespacedName]*memberCaches{}, kinds: map[kindID]kindRunner{}}
}

// ErrRunning is Start's error when the Cache is already running.
var ErrRunning = errors.New("fleetcache: already started; call Stop first")

// Start follows the members' membership until Stop or until ctx ends, starting the caches of
// every kind asked for on every member. It returns at once: members' caches sync in the
// background, each at its own pace; see Kind.WaitForCacheSync and Kind.Status.
func (c *Cache) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.running != nil {
		c.mu.Unlock()
		return ErrRunning
	}
	run := &running{}
	run.ctx, run.cancel = context.WithCancel(ctx)
	c.running = run
	// The members there are now have caches when Start returns, so that WaitForCacheSync waits for
	// them; the subscription's first events, MemberAdded for each, then find them in place.
	for _, m := range c.members.Members() {
		mc := newMemberCaches(run.ctx, m)
		c.caches[m.Name()] = mc
		for _, k := range c.sortedKinds() {
			k.startOn(mc)
		}
	}
	c.mu.Unlock()

	// Membership changes arrive one at a time, in order; not under the lock, in case a Members
	// implementation calls fn before Subscribe returns.
	unsubscribe := c.members.Subscribe(func(ev multicluster.MemberEvent) { c.onMember(run, ev) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running != run { // Stop came meanwhile
		unsubscribe()
		return errors.New("fleetcache: stopped while starting")
	}
	run.unsubscribe = unsubscribe
	return nil
}

// Stop ends every member's caches and waits for their goroutines. Objects cached so far are
// dropped. Calling Stop when the Cache is not running does nothing.
func (c *Cache) Stop() {
	c.mu.Lock()
	run := c.running
	if run == nil {
		c.mu.Unlock()
		return
	}
	c.running = nil
	caches := c.caches
	c.caches = map[types.NamespacedName]*memberCaches{}
	c.mu.Unlock()

	if run.unsubscribe != nil { // else Start, still subscribing, ends the subscription
		run.unsubscribe()
	}
	run.cancel()
	for _, mc := range caches {
		mc.stop()
	}
}

// onMember starts, restarts or stops a member's caches.
func (c *Cache) onMember(run *running, ev multicluster.MemberEvent) {
	key := ev.Member.Name()
	c.mu.Lock()
	if c.running != run { // a late event of a stopped subscription
		c.mu.Unlock()
		return
	}
	old := c.caches[key]
	if ev.Type == multicluster.MemberAdded && old != nil && old.member == ev.Member {
		c.mu.Unlock()
		return // started by Start
	}
	if old != nil {
		// Cancelled before the lock is let go, so no reader sees the new caches beside old ones
		// still running; waiting for them to finish is done outside the lock.
		old.cancel()
	}
	var mc *memberCaches
	if ev.Type == multicluster.MemberRemoved {
		delete(c.caches, key)
	} else {
		// A member reached differently may be another cluster: its caches start over, from a list.
		mc = newMemberCaches(run.ctx, ev.Member)
		c.caches[key] = mc
		for _, k := range c.sortedKinds() {
			k.startOn(mc)
		}
	}
	kinds := c.sortedKinds()
	c.mu.Unlock()
	if old != nil {
		for _, k := range kinds {
			k.changed() // the member's objects, as cached, are gone
		}
		old.stop()
	}
}

// sortedKinds are the kinds asked for, in the order they were asked for.
func (c *Cache) sortedKinds() []kindRunner {
	out := make([]kindRunner, 0, len(c.kinds))
	for _, k := range c.kinds {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b kindRunner) int { return cmp.Compare(a.order(), b.order()) })
	return out
}

// memberSet is the members with caches, in no order.
func (c *Cache) memberSet() []*memberCaches {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*memberCaches, 0, len(c.caches))
	for _, mc := range c.caches {
		out = append(out, mc)
	}
	return out
}

// memberList is the members with caches, ordered by namespace and name.
func (c *Cache) memberList() []*memberCaches {
	out := c.memberSet()
	slices.SortFunc(out, func(a, b *memberCaches) int {
		ak, bk := a.member.Name(), b.member.Name()
		return cmp.Or(cmp.Compare(ak.Namespace, bk.Namespace), cmp.Compare(ak.Name, bk.Name))
	})
	return out
}

func (c *Cache) memberCaches(member types.NamespacedName) *memberCaches {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.caches[member]
}
