package fleettest

import "github.com/cluster-registry/sdk/multicluster"

// Fixed is a fixed set of members, as a Fleet that never changes would present them: Members
// lists them, and Subscribe says at once that each was added, as a Fleet's first events do. It
// serves where a *multicluster.Fleet would (fleetcache, mcprovider, rotation) without a registry.
type Fixed []*multicluster.Member

// Members is the set.
func (f Fixed) Members() []*multicluster.Member { return f }

// Subscribe calls fn with MemberAdded for each member, and never again.
func (f Fixed) Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func()) {
	for _, m := range f {
		fn(multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m})
	}
	return func() {}
}
