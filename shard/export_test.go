package shard

import (
	"context"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/multicluster"
)

// BucketParts are the owned-bucket half of a bucket view, for the package's tests to drive one
// step at a time, as Run would.
type BucketParts struct{ b *bucketed }

func NewBucketParts(registry versioned.Interface, resolver *access.Resolver, opts multicluster.FleetOptions) (BucketParts, error) {
	b, err := newBucketed(registry, resolver, opts, nil)
	return BucketParts{b}, err
}

// Follow makes the kept members follow the owned Fleet, as Run does first.
func (p BucketParts) Follow() (stop func()) { return p.b.byBucket.Follow(p.b.owned) }

// Keep sets the rule for buckets, as Run does when the group changes, before Watch.
func (p BucketParts) Keep(buckets []int) { p.b.byBucket.Keep(p.b.inBuckets(buckets)) }

// Watch makes the owned Fleet follow buckets, as Run does after Keep.
func (p BucketParts) Watch(ctx context.Context, buckets []int) error { return p.b.watch(ctx, buckets) }

// StopWatching ends the owned Fleet's watch, as Watch does first.
func (p BucketParts) StopWatching() { p.b.owned.Stop() }

// Kept reports whether the member is kept.
func (p BucketParts) Kept(key types.NamespacedName) bool { return p.b.byBucket.Has(key) }
