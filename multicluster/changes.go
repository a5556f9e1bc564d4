package multicluster

// ChangeSource is a MemberSource that also tells when a member's Cluster changes in any way after
// it was added (its labels, annotations or status, not only how it is reached): what a controller
// that derives something from the whole Cluster follows, as the ClusterProfile publisher derives a
// profile. A *Fleet is one, and so is a shard.View of one.
//
// Membership events stay on Subscribe, which most controllers need alone: a status written every
// heartbeat for each member is a change, and would otherwise wake every cache and engagement.
type ChangeSource interface {
	MemberSource
	// SubscribeChanges calls fn with a member each time its Cluster changes, in order, one call at
	// a time, until the returned function is called. Additions and removals come through
	// Subscribe, and the two subscriptions are not ordered with each other: read the member's
	// Cluster when called, not the order of calls.
	SubscribeChanges(fn func(*Member)) (unsubscribe func())
}

var _ ChangeSource = (*Fleet)(nil)

// SubscribeChanges calls fn with a member each time its Cluster changes after it joined the Fleet
// (any new resourceVersion: labels, annotations, status, endpoints), in order, one call at a
// time, from a goroutine that runs only while calls wait, until the returned function is called.
func (f *Fleet) SubscribeChanges(fn func(*Member)) (unsubscribe func()) {
	f.mu.Lock()
	q := f.changes.Add(fn)
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		f.changes.Remove(q)
		f.mu.Unlock()
		q.Stop()
	}
}
