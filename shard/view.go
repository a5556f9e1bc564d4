package shard

import (
	"context"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/internal/subscribe"
	"github.com/cluster-registry/sdk/multicluster"
)

// View is the members this replica owns, of a Fleet shared by the process: a
// multicluster.MemberSource, so that the health controller, the rotator, fleetcache and
// mcprovider given it work on those members alone, and hold nothing for the rest. Ownership follows
// the Fleet (members joining and leaving) and the group (replicas starting, stopping, crashing):
// a member this replica gains is MemberAdded, one it loses MemberRemoved.
//
// In the moment the group changes, two replicas may each see a different set of peers, and so
// both own a member (or neither) until both have looked again, at most one RenewPeriod: work that
// may run twice then must be safe twice (the health controller's status is server-side applied;
// the rotator's Secret update is guarded by its resourceVersion, so one of two renewals loses).
type View struct {
	fleet multicluster.MemberSource
	peers *Peers

	mu    sync.Mutex
	owned map[types.NamespacedName]*multicluster.Member
	all   map[types.NamespacedName]*multicluster.Member
	subs  subscribe.List[multicluster.MemberEvent]
	// changes are SubscribeChanges' subscribers, told of the owned members' changes when the
	// Fleet tells of them (it is a multicluster.ChangeSource).
	changes subscribe.List[*multicluster.Member]
}

// NewView is the members of fleet that self owns among peers. Run it (it follows both) after
// starting the Fleet.
func NewView(fleet multicluster.MemberSource, peers *Peers) *View {
	return &View{fleet: fleet, peers: peers, owned: map[types.NamespacedName]*multicluster.Member{}, all: map[types.NamespacedName]*multicluster.Member{}}
}

// Members is the members this replica owns now, ordered by cluster set and name.
func (v *View) Members() []*multicluster.Member {
	v.mu.Lock()
	defer v.mu.Unlock()
	return sorted(v.owned)
}

// Owns reports whether this replica owns the member now.
func (v *View) Owns(key types.NamespacedName) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.owned[key]
	return ok
}

// Subscribe calls fn with MemberAdded for each member owned now, then with each change of what
// this replica owns (a MemberReachChanged of an owned member included), in order, one call at a
// time, until unsubscribe.
func (v *View) Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func()) {
	v.mu.Lock()
	var initial []multicluster.MemberEvent
	for _, m := range sorted(v.owned) {
		initial = append(initial, multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
	}
	q := v.subs.Add(fn, initial...)
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		v.subs.Remove(q)
		v.mu.Unlock()
		q.Stop()
	}
}

// SubscribeChanges calls fn with an owned member each time its Cluster changes (see
// multicluster.ChangeSource), in order, one call at a time, until unsubscribe. It is never called
// when the View's Fleet does not tell of changes (is no multicluster.ChangeSource).
func (v *View) SubscribeChanges(fn func(*multicluster.Member)) (unsubscribe func()) {
	v.mu.Lock()
	q := v.changes.Add(fn)
	v.mu.Unlock()
	return func() {
		v.mu.Lock()
		v.changes.Remove(q)
		v.mu.Unlock()
		q.Stop()
	}
}

// onChange passes on a change of an owned member.
func (v *View) onChange(m *multicluster.Member) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.owned[m.Name()] == m {
		v.changes.Send(m)
	}
}

// Run follows the Fleet and the group until ctx ends; then the view owns nothing, and says so.
func (v *View) Run(ctx context.Context) error {
	changed := v.peers.changed()
	unsubscribe := v.fleet.Subscribe(v.onFleet)
	defer unsubscribe()
	if cs, ok := v.fleet.(multicluster.ChangeSource); ok {
		defer cs.SubscribeChanges(v.onChange)()
	}
	for {
		select {
		case <-ctx.Done():
			v.mu.Lock()
			v.all = map[types.NamespacedName]*multicluster.Member{}
			v.reassignLocked()
			v.mu.Unlock()
			return nil
		case <-changed:
			v.mu.Lock()
			v.reassignLocked()
			v.mu.Unlock()
		}
	}
}

// onFleet follows the Fleet: a member joining or leaving is owned, or given up, by this replica
// alone of the group, with no change for the others' members.
func (v *View) onFleet(ev multicluster.MemberEvent) {
	v.mu.Lock()
	defer v.mu.Unlock()
	key := ev.Member.Name()
	switch ev.Type {
	case multicluster.MemberAdded:
		v.all[key] = ev.Member
		if v.ownsLocked(key) {
			v.owned[key] = ev.Member
			v.publishLocked(ev)
		}
	case multicluster.MemberRemoved:
		delete(v.all, key)
		if _, ok := v.owned[key]; ok {
			delete(v.owned, key)
			v.publishLocked(ev)
		}
	case multicluster.MemberReachChanged:
		if _, ok := v.owned[key]; ok {
			v.publishLocked(ev)
		}
	}
}

// ownsLocked reports whether this replica, seeing itself live, is key's owner. v.mu is held.
func (v *View) ownsLocked(key types.NamespacedName) bool {
	live, self := v.peers.Live(), v.peers.Self()
	return slices.ContainsFunc(live, func(p Peer) bool { return p.ID == self.ID }) && Owner(key.String(), live) == self.ID
}

// reassignLocked owns what Owner gives this replica among the live peers, and publishes the
// difference. Until this replica sees itself live, it owns nothing. v.mu is held.
func (v *View) reassignLocked() {
	live, self := v.peers.Live(), v.peers.Self()
	isLive := false
	for _, p := range live {
		if p.ID == self.ID {
			isLive = true
		}
	}
	for key, m := range v.owned {
		if _, ok := v.all[key]; !ok || !isLive || Owner(key.String(), live) != self.ID {
			delete(v.owned, key)
			v.publishLocked(multicluster.MemberEvent{Type: multicluster.MemberRemoved, Member: m})
		}
	}
	if !isLive {
		return
	}
	for _, m := range sorted(v.all) {
		key := m.Name()
		if _, ok := v.owned[key]; !ok && Owner(key.String(), live) == self.ID {
			v.owned[key] = m
			v.publishLocked(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
		}
	}
}

func (v *View) publishLocked(ev multicluster.MemberEvent) { v.subs.Send(ev) }

func sorted(ms map[types.NamespacedName]*multicluster.Member) []*multicluster.Member {
	out := make([]*multicluster.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *multicluster.Member) int { return strings.Compare(a.String(), b.String()) })
	return out
}

var _ multicluster.ChangeSource = (*View)(nil)
