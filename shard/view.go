package shard

import (
	"context"
	"errors"
	"slices"

	"k8s.io/apimachinery/pkg/types"

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
	peers *Peers
	impl  following
}

// following is how a View follows the registry and the group: NewView's (wholeFleet) or
// NewBucketView's (bucketed).
type following interface {
	members() ownedSet
	run(ctx context.Context) error
	ready() error
}

// ownedSet is what a View tells of: the members owned now.
type ownedSet interface {
	multicluster.ChangeSource
	Has(key types.NamespacedName) bool
}

// NewView is the members of fleet that self owns among peers. Run it (it follows both) after
// starting the Fleet. Each replica follows every member (the Fleet's), and owns some by their
// names; NewBucketView's replicas follow only what they own.
func NewView(fleet multicluster.MemberSource, peers *Peers) *View {
	return &View{peers: peers, impl: &wholeFleet{fleet: fleet, peers: peers, subset: multicluster.NewSubset()}}
}

// wholeFleet is NewView's way: a Fleet of every member, of which subset keeps the members the
// group gives this replica, by their names.
type wholeFleet struct {
	fleet  multicluster.MemberSource
	peers  *Peers
	subset *multicluster.Subset
}

func (w *wholeFleet) members() ownedSet { return w.subset }

// ready is the Fleet's freshness; any other MemberSource is taken as ready.
func (w *wholeFleet) ready() error {
	if f, ok := w.fleet.(*multicluster.Fleet); ok {
		return fresh(f.Status())
	}
	return nil
}

// Ready is nil when the view follows the registry: the Fleet given to NewView is fresh (any
// other MemberSource is taken as ready), or a bucket view's Fleets are. Otherwise it says since
// when the view is stale, and why.
func (v *View) Ready() error { return v.impl.ready() }

// fresh is nil for a fresh Fleet's status, else an error that says why it is not.
func fresh(st multicluster.FleetStatus) error {
	if st.Fresh() {
		return nil
	}
	return errors.New(st.String())
}

// Members is the members this replica owns now, ordered by cluster set and name.
func (v *View) Members() []*multicluster.Member { return v.impl.members().Members() }

// Owns reports whether this replica owns the member now.
func (v *View) Owns(key types.NamespacedName) bool { return v.impl.members().Has(key) }

// Subscribe calls fn with MemberAdded for each member owned now, then with each change of what
// this replica owns (a MemberReachChanged of an owned member included), in order, one call at a
// time, until unsubscribe.
func (v *View) Subscribe(fn func(multicluster.MemberEvent)) (unsubscribe func()) {
	return v.impl.members().Subscribe(fn)
}

// SubscribeChanges calls fn with an owned member each time its Cluster changes (see
// multicluster.ChangeSource), in order, one call at a time, until unsubscribe. It is never called
// when the View's Fleet does not tell of changes (is no multicluster.ChangeSource).
func (v *View) SubscribeChanges(fn func(*multicluster.Member)) (unsubscribe func()) {
	return v.impl.members().SubscribeChanges(fn)
}

// Run follows the Fleet and the group until ctx ends; then the view owns nothing, and says so.
func (v *View) Run(ctx context.Context) error { return v.impl.run(ctx) }

// run follows the Fleet and the group until ctx ends.
func (w *wholeFleet) run(ctx context.Context) error {
	changed := w.peers.changed()
	w.subset.Keep(ownerByName(w.peers.Live(), w.peers.Self().ID))
	stop := w.subset.Follow(w.fleet)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			w.subset.Keep(ownerByName(w.peers.Live(), w.peers.Self().ID))
		}
	}
}

// ownerByName is the rule of what self owns among the live peers as it sees them now: what
// Owner gives it, and nothing until it sees itself live.
func ownerByName(live []Peer, self string) func(types.NamespacedName) bool {
	if !slices.ContainsFunc(live, func(p Peer) bool { return p.ID == self }) {
		return func(types.NamespacedName) bool { return false }
	}
	return func(key types.NamespacedName) bool { return Owner(key.String(), live) == self }
}

var _ multicluster.ChangeSource = (*View)(nil)
