package shard

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/multicluster"
)

// NewBucketView is the members of the registry's Clusters that match opts and that self owns
// among peers, as NewView's, but each replica watches only what it owns, where NewView's follow a
// Fleet of every member: a group of three replicas then receives and decodes each Cluster's
// status writes once, not three times (in BenchmarkShardedHealth's runs, 1.04–1.21 of one
// replica's probes per core with bucket views, against 0.91–0.93 following every Cluster).
//
// The group divides buckets (BucketLabel), not members: each replica follows two Fleets of its
// own, one of the Clusters in the buckets it owns (a label selector the registry filters by, set
// anew when the buckets it owns change; the members it keeps keep their clients), and one of the
// Clusters in no bucket (no label, or a value that names none), of which it owns some by their
// names, as NewView does. Run it; it starts and stops both Fleets. Members() and the rest behave
// as NewView's.
//
// Use it where the process needs only its own members: a process whose controllers weigh every
// member (placements, or delivery's sharding) follows a whole Fleet anyway, and NewView over it
// costs no watch more.
func NewBucketView(registry versioned.Interface, resolver *access.Resolver, opts multicluster.FleetOptions, peers *Peers) (*View, error) {
	b, err := newBucketed(registry, resolver, opts, peers)
	if err != nil {
		return nil, err
	}
	return &View{peers: peers, impl: b}, nil
}

// newBucketed is a bucket view's parts, not yet following anything.
func newBucketed(registry versioned.Interface, resolver *access.Resolver, opts multicluster.FleetOptions, peers *Peers) (*bucketed, error) {
	base := opts.Selector
	if base == nil {
		base = labels.Everything()
	}
	reqs, _ := base.Requirements()
	if slices.ContainsFunc(reqs, func(r labels.Requirement) bool { return r.Key() == BucketLabel }) {
		return nil, fmt.Errorf("shard: FleetOptions.Selector %q selects on %s, which a bucket view sets itself; select on other labels", base, BucketLabel)
	}
	inNone, err := labels.NewRequirement(BucketLabel, selection.NotIn, bucketValues(allBuckets()))
	if err != nil {
		return nil, fmt.Errorf("shard: %w", err)
	}
	unlabelled := opts
	unlabelled.Selector = base.Add(*inNone)
	return &bucketed{
		peers: peers, base: base,
		unlabelled: multicluster.NewFleet(registry, resolver, unlabelled),
		owned:      multicluster.NewFleet(registry, resolver, opts),
		byName:     multicluster.NewSubset(), byBucket: multicluster.NewSubset(), union: newUnion(),
	}, nil
}

// bucketed is a bucket view's parts: two Fleets, the members each keeps, and their union.
type bucketed struct {
	peers *Peers
	base  labels.Selector
	// unlabelled follows the Clusters in no bucket; byName keeps those this replica owns.
	unlabelled *multicluster.Fleet
	byName     *multicluster.Subset
	// owned follows the Clusters in the buckets this replica owns; byBucket keeps them, less
	// those of buckets it has just lost, until owned is reselected.
	owned    *multicluster.Fleet
	byBucket *multicluster.Subset
	union    *union
	// watching is whether owned follows some buckets (this replica owns some).
	watching atomic.Bool
}

// run follows the group and both Fleets until ctx ends; then it stops both, and the view owns
// nothing, and says so.
func (b *bucketed) run(ctx context.Context) error {
	changed := b.peers.changed()
	defer b.union.follow(b.byName, b.byBucket)()
	defer b.byName.Follow(b.unlabelled)()
	defer b.byBucket.Follow(b.owned)()
	defer b.owned.Stop()
	defer b.unlabelled.Stop()
	if err := b.unlabelled.Start(ctx); err != nil {
		return ended(ctx, err)
	}
	var watching []int
	for {
		live, self := b.peers.Live(), b.peers.Self().ID
		buckets := ownedBuckets(live, self)
		// The rules first: a bucket lost is dropped now, before its watch ends.
		b.byName.Keep(ownerByName(live, self))
		b.byBucket.Keep(b.inBuckets(buckets))
		if !slices.Equal(buckets, watching) {
			if err := b.watch(ctx, buckets); err != nil {
				return ended(ctx, err)
			}
			watching = buckets
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

func (b *bucketed) members() ownedSet { return b.union }

// ready is nil while both Fleets are fresh: the owned Fleet only once it follows buckets.
func (b *bucketed) ready() error {
	if err := fresh(b.unlabelled.Status()); err != nil {
		return err
	}
	if st := b.owned.Status(); !st.Fresh() && b.watching.Load() {
		return fresh(st)
	}
	return nil
}

// watch makes the owned Fleet follow the Clusters of buckets, or none.
func (b *bucketed) watch(ctx context.Context, buckets []int) error {
	b.watching.Store(len(buckets) > 0)
	if len(buckets) == 0 {
		b.owned.Stop()
		return nil
	}
	in, err := labels.NewRequirement(BucketLabel, selection.In, bucketValues(buckets))
	if err != nil {
		return err
	}
	if err := b.owned.Reselect(ctx, b.base.Add(*in)); err != nil {
		return err
	}
	// The rule again, now that the Fleet holds these buckets alone: a member it kept through the
	// change, relabelled between the old watch's end and the new list from a bucket lost to one
	// kept, was dropped by the rule and never left the Fleet, so nothing else would add it back.
	b.byBucket.Keep(b.inBuckets(buckets))
	return nil
}

// inBuckets is the rule of which of the owned Fleet's members are kept: those whose label names
// one of buckets. The Fleet may still hold a bucket this replica no longer owns.
func (b *bucketed) inBuckets(buckets []int) func(types.NamespacedName) bool {
	var set [Buckets]bool
	for _, bk := range buckets {
		set[bk] = true
	}
	return func(key types.NamespacedName) bool {
		m := b.owned.Member(key.Namespace, key.Name)
		if m == nil {
			return false
		}
		bk, ok := parseBucket(m.Cluster().Labels[BucketLabel])
		return ok && set[bk]
	}
}

// ended is nil when err came of ctx ending (a Fleet that stopped following as asked), else err.
func ended(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("shard: following the registry: %w", err)
}
