package multicluster

// MemberEventType is what happened to a Fleet's member.
type MemberEventType int

const (
	// MemberAdded: a Cluster joined the Fleet (or was there when Subscribe was called).
	MemberAdded MemberEventType = iota + 1
	// MemberReachChanged: the member's Cluster changed how it is reached (its endpoints or auth
	// providers). The Member is the same; its clients are rebuilt on next use. Per-member state
	// tied to the old endpoint (watches, caches) should be restarted. Rotated credentials behind
	// an unchanged Cluster are not a change: the member's clients pick them up.
	MemberReachChanged
	// MemberRemoved: the Cluster was deleted or no longer matches the Fleet's options.
	MemberRemoved
)

func (t MemberEventType) String() string {
	switch t {
	case MemberAdded:
		return "Added"
	case MemberReachChanged:
		return "ReachChanged"
	case MemberRemoved:
		return "Removed"
	}
	return "Unknown"
}

// MemberEvent is a change of a Fleet's membership.
type MemberEvent struct {
	Type   MemberEventType
	Member *Member
}

// Subscribe calls fn for every change of membership, for tools that keep per-member state (what
// multicluster-runtime calls engaging a cluster). It first calls fn with MemberAdded for each
// member already in the Fleet, then for each change, in order, one call at a time.
//
// Calls are made from a goroutine that runs only while events wait, so a slow fn delays its own
// later events and never the Fleet, other subscribers or fan-outs; an idle subscription holds no
// goroutine. The returned function ends the subscription: no call starts after it returns,
// though one under way may still finish.
func (f *Fleet) Subscribe(fn func(MemberEvent)) (unsubscribe func()) {
	f.mu.Lock()
	var initial []MemberEvent
	for _, m := range f.membersLocked() {
		initial = append(initial, MemberEvent{Type: MemberAdded, Member: m})
	}
	q := f.subs.Add(fn, initial...)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.subs.Remove(q)
		f.mu.Unlock()
		q.Stop()
	}
}

// publish queues ev for every subscriber; f.mu is held.
func (f *Fleet) publish(ev MemberEvent) { f.subs.Send(ev) }

// membersLocked is Members for a caller holding f.mu.
func (f *Fleet) membersLocked() []*Member {
	if p := f.snapshot.Load(); p != nil {
		return *p
	}
	out := make([]*Member, 0, len(f.members))
	for _, m := range f.members {
		out = append(out, m)
	}
	sortMembers(out)
	return out
}
