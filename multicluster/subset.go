package multicluster

import (
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/internal/subscribe"
)

// Subset is the members of a source (a Fleet, or another view of one) that a rule keeps, live:
// itself a ChangeSource, so that a fan-out, fleetcache, mcprovider or a controller given it works
// on those members alone. It follows the source's members (Follow) and the rule (Keep): a member
// that comes to be kept is MemberAdded, one that stops being kept, or leaves the source,
// MemberRemoved, and a kept member's MemberReachChanged and Cluster changes are passed on. Until
// a rule is set it keeps nothing.
//
// It is what package shard's View (the members a replica owns) and package decision's View (the
// members a placement decision chooses) are made of.
type Subset struct {
	mu   sync.Mutex
	keep func(types.NamespacedName) bool
	all  map[types.NamespacedName]*Member // the source's
	kept map[types.NamespacedName]*Member
	subs subscribe.List[MemberEvent]
	// changes are SubscribeChanges' subscribers, told of kept members' changes when the source
	// tells of them (it is a ChangeSource).
	changes subscribe.List[*Member]
}

// NewSubset is a Subset that keeps nothing until Keep gives it a rule, of a source that Follow
// follows.
func NewSubset() *Subset {
	return &Subset{all: map[types.NamespacedName]*Member{}, kept: map[types.NamespacedName]*Member{}}
}

// Follow follows source's members (and, for a ChangeSource, their changes) until the returned
// function is called; then the Subset keeps nothing, and says so.
func (s *Subset) Follow(source MemberSource) (stop func()) {
	unsubscribe := source.Subscribe(s.onSource)
	stopChanges := func() {}
	if cs, ok := source.(ChangeSource); ok {
		stopChanges = cs.SubscribeChanges(s.onChange)
	}
	return func() {
		unsubscribe()
		stopChanges()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.all = map[types.NamespacedName]*Member{}
		s.reconcileLocked()
	}
}

// Keep makes keep the rule, and publishes what it changes. keep is called with s's lock held:
// it must not call back into s.
func (s *Subset) Keep(keep func(types.NamespacedName) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keep = keep
	s.reconcileLocked()
}

// Members is the kept members now, ordered by cluster set and name.
func (s *Subset) Members() []*Member {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedMembers(s.kept)
}

// Has reports whether the member is kept now.
func (s *Subset) Has(key types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.kept[key]
	return ok
}

// Subscribe calls fn with MemberAdded for each member kept now, then with each change of what is
// kept (a MemberReachChanged of a kept member included), in order, one call at a time, until
// unsubscribe.
func (s *Subset) Subscribe(fn func(MemberEvent)) (unsubscribe func()) {
	s.mu.Lock()
	var initial []MemberEvent
	for _, m := range sortedMembers(s.kept) {
		initial = append(initial, MemberEvent{Type: MemberAdded, Member: m})
	}
	q := s.subs.Add(fn, initial...)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.subs.Remove(q)
		s.mu.Unlock()
		q.Stop()
	}
}

// SubscribeChanges calls fn with a kept member each time its Cluster changes (see ChangeSource),
// in order, one call at a time, until unsubscribe. It is never called when the source does not
// tell of changes.
func (s *Subset) SubscribeChanges(fn func(*Member)) (unsubscribe func()) {
	s.mu.Lock()
	q := s.changes.Add(fn)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.changes.Remove(q)
		s.mu.Unlock()
		q.Stop()
	}
}

// onSource follows the source's membership, one member at a time: a member joining or leaving
// touches only itself, so following a source of 10,000 members costs no pass over them all.
func (s *Subset) onSource(ev MemberEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ev.Member.Name()
	switch ev.Type {
	case MemberAdded:
		s.all[key] = ev.Member
		if old, ok := s.kept[key]; ok && old != ev.Member {
			delete(s.kept, key)
			s.subs.Send(MemberEvent{Type: MemberRemoved, Member: old})
		}
		if _, ok := s.kept[key]; !ok && s.keep != nil && s.keep(key) {
			s.kept[key] = ev.Member
			s.subs.Send(ev)
		}
	case MemberRemoved:
		if s.all[key] == ev.Member {
			delete(s.all, key)
		}
		if s.kept[key] == ev.Member {
			delete(s.kept, key)
			s.subs.Send(ev)
		}
	case MemberReachChanged:
		if s.kept[key] == ev.Member {
			s.subs.Send(ev)
		}
	}
}

func (s *Subset) onChange(m *Member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kept[m.Name()] == m {
		s.changes.Send(m)
	}
}

// reconcileLocked keeps the source's members that the rule keeps, and publishes the difference:
// removals first, then additions in order. A member the source replaced (another Member for the
// same name) is removed, then added. s.mu is held.
func (s *Subset) reconcileLocked() {
	for key, m := range s.kept {
		if s.all[key] != m || s.keep == nil || !s.keep(key) {
			delete(s.kept, key)
			s.subs.Send(MemberEvent{Type: MemberRemoved, Member: m})
		}
	}
	if s.keep == nil {
		return
	}
	for _, m := range sortedMembers(s.all) {
		key := m.Name()
		if _, ok := s.kept[key]; !ok && s.keep(key) {
			s.kept[key] = m
			s.subs.Send(MemberEvent{Type: MemberAdded, Member: m})
		}
	}
}

func sortedMembers(ms map[types.NamespacedName]*Member) []*Member {
	out := make([]*Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Member) int { return strings.Compare(a.String(), b.String()) })
	return out
}

var _ ChangeSource = (*Subset)(nil)
