package multicluster

// MemberSource is what per-member controllers follow: the members, and their comings and goings.
// A *Fleet is one; so is a view of one (a shard of it, for example), which is how several
// controllers of one process share one watch of the registry, each seeing what it should.
type MemberSource interface {
	// Members is every member now, ordered by cluster set and name.
	Members() []*Member
	// Subscribe calls fn with MemberAdded for each member now, then with each change, in order,
	// one call at a time, until the returned function is called. See Fleet.Subscribe.
	Subscribe(fn func(MemberEvent)) (unsubscribe func())
}

var _ MemberSource = (*Fleet)(nil)
