package shard

import (
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/internal/subscribe"
	"github.com/cluster-registry/sdk/multicluster"
)

// union is the members of sources that hold disjoint sets of Clusters, as one ChangeSource: a
// bucket view's members kept by bucket and those kept by name. A Cluster whose label changes moves
// from one source to the other, and the two may tell of it in either order (each from a goroutine
// of its own), so the union keeps, for each name, what each source holds: the member it shows is
// the one added last, and when that one goes, the one another source still holds, if any.
type union struct {
	mu      sync.Mutex
	held    []map[types.NamespacedName]*multicluster.Member // by source
	current map[types.NamespacedName]*multicluster.Member
	subs    subscribe.List[multicluster.MemberEvent]
	changes subscribe.List[*multicluster.Member]
}

func newUnion() *union {
	return &union{current: map[types.NamespacedName]*multicluster.Member{}}
}

// follow follows sources until the returned function is called; then the union holds nothing of
// theirs, and says so.
func (u *union) follow(sources ...multicluster.ChangeSource) (stop func()) {
	var stops []func()
	for _, s := range sources {
		u.mu.Lock()
		i := len(u.held)
		u.held = append(u.held, map[types.NamespacedName]*multicluster.Member{})
		u.mu.Unlock()
		stops = append(stops,
			s.Subscribe(func(ev multicluster.MemberEvent) { u.on(i, ev) }),
			s.SubscribeChanges(u.onChange))
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
		u.mu.Lock()
		defer u.mu.Unlock()
		for key, m := range u.current {
			delete(u.current, key)
			u.subs.Send(multicluster.MemberEvent{Type: multicluster.MemberRemoved, Member: m})
		}
		for i := range u.held {
			u.held[i] = map[types.NamespacedName]*multicluster.Member{}
		}
	}
}

// on is source i's event.
func (u *union) on(i int, ev multicluster.MemberEvent) {
	u.mu.Lock()
	defer u.mu.Unlock()
	key := ev.Member.Name()
	switch ev.Type {
	case multicluster.MemberAdded:
		u.held[i][key] = ev.Member
		u.show(key, ev.Member)
	case multicluster.MemberRemoved:
		if u.held[i][key] == ev.Member {
			delete(u.held[i], key)
		}
		if u.current[key] != ev.Member {
			return
		}
		for _, held := range u.held {
			if m, ok := held[key]; ok {
				u.show(key, m)
				return
			}
		}
		delete(u.current, key)
		u.subs.Send(ev)
	case multicluster.MemberReachChanged:
		if u.current[key] == ev.Member {
			u.subs.Send(ev)
		}
	}
}

// show makes m the member shown for key, replacing (removed, then added) any other. u.mu is held.
func (u *union) show(key types.NamespacedName, m *multicluster.Member) {
	old, ok := u.current[key]
	if old == m {
		return
	}
	if ok {
		u.subs.Send(multicluster.MemberEvent{Type: multicluster.MemberRemoved, Member: old})
	}
	u.current[key] = m
	u.subs.Send(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
}

func (u *union) onChange(m *multicluster.Member) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.current[m.Name()] == m {
		u.changes.Send(m)
	}
}

// Members is the members shown now, ordered by cluster set and name.
func (u *union) Members() []*multicluster.Member {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sortedLocked()
}

// sortedLocked is Members' answer; u.mu is held.
func (u *union) sortedLocked() []*multicluster.Member {
	out := make([]*multicluster.Member, 0, len(u.current))
	for _, m := range u.current {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *multicluster.Member) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// Has reports whether a member of that name is shown now.
func (u *union) Has(key types.NamespacedName) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	_, ok := u.current[key]
	return ok
}

// Subscribe: see multicluster.MemberSource.
func (u *union) Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func()) {
	u.mu.Lock()
	var initial []multicluster.MemberEvent
	for _, m := range u.sortedLocked() {
		initial = append(initial, multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
	}
	q := u.subs.Add(fn, initial...)
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		u.subs.Remove(q)
		u.mu.Unlock()
		q.Stop()
	}
}

// SubscribeChanges: see multicluster.ChangeSource.
func (u *union) SubscribeChanges(fn func(*multicluster.Member)) (unsubscribe func()) {
	u.mu.Lock()
	q := u.changes.Add(fn)
	u.mu.Unlock()
	return func() {
		u.mu.Lock()
		u.changes.Remove(q)
		u.mu.Unlock()
		q.Stop()
	}
}
