package shard

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// A bucket is part of a Cluster's label, set once by whoever registers it: BucketOf must give the
// same answer in every release. These are its answers today.
func TestBucketOfNeverChanges(t *testing.T) {
	for _, c := range []struct{ ns, name, bucket string }{
		{"fleet", "member-00000", "59"},
		{"fleet", "member-00001", "39"},
		{"prod", "eu-west-1", "19"},
	} {
		require.Equal(t, c.bucket, BucketOf(c.ns, c.name), "%s/%s", c.ns, c.name)
	}
}

// 10,000 names fill the 64 buckets evenly: each within a third of its share.
func TestBucketOfIsEven(t *testing.T) {
	var counts [Buckets]int
	for i := range 10000 {
		b, ok := parseBucket(BucketOf("fleet", fmt.Sprintf("member-%05d", i)))
		require.True(t, ok)
		counts[b]++
	}
	for b, n := range counts {
		require.InDelta(t, 10000.0/Buckets, n, 10000.0/Buckets/3, "bucket %d", b)
	}
}

// A value names a bucket only as BucketOf writes it: the registry matches label values exactly, so
// "07" must fall to the Clusters in no bucket, not to bucket 7's owner, which does not watch it.
func TestParseBucket(t *testing.T) {
	for v, want := range map[string]int{"0": 0, "7": 7, "63": 63} {
		b, ok := parseBucket(v)
		require.True(t, ok, v)
		require.Equal(t, want, b)
	}
	for _, v := range []string{"", "07", "+7", "-1", "64", "1e1", " 7", "x", "9999999999999999999999"} {
		_, ok := parseBucket(v)
		require.False(t, ok, "%q names no bucket", v)
	}
}

func TestSetBucketKeepsAChosenLabel(t *testing.T) {
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "member-00000"}}
	SetBucket(c)
	require.Equal(t, "59", c.Labels[BucketLabel])
	c.Labels[BucketLabel] = "3"
	SetBucket(c)
	require.Equal(t, "3", c.Labels[BucketLabel], "SetBucket replaced a label the Cluster had")
}

// Every bucket has one owner among the peers, whatever their order; no peer owns more than its
// share rounded up; and as a peer joins or leaves, few buckets move.
func TestBucketOwners(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 12; n++ {
		peers := make([]Peer, n)
		for i := range peers {
			peers[i] = Peer{ID: fmt.Sprintf("health-%d", i)}
		}
		owners := bucketOwners(peers)
		counts := map[string]int{}
		for b, id := range owners {
			require.NotEmpty(t, id, "%d peers: bucket %d has no owner", n, b)
			counts[id]++
		}
		share := int(math.Ceil(float64(Buckets) / float64(n)))
		for _, p := range peers {
			require.LessOrEqual(t, counts[p.ID], share, "%d peers: %s owns more than its share", n, p.ID)
			// The rest fill up before the last: none is left far below its share.
			require.GreaterOrEqual(t, counts[p.ID], Buckets-share*(n-1), "%d peers: %s owns too little", n, p.ID)
		}
		shuffled := append([]Peer(nil), peers...)
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		require.Equal(t, owners, bucketOwners(shuffled), "%d peers: the order of peers changed the owners", n)

		// One more peer: the buckets it takes move, and some more as the others' shares shrink
		// (bounded shares cost that: up to about three times its share, with 12 peers).
		joined := bucketOwners(append(peers, Peer{ID: "health-new"}))
		moved := 0
		for b := range owners {
			if owners[b] != joined[b] {
				moved++
			}
		}
		ideal := Buckets / (n + 1)
		t.Logf("%d peers, one joins: %d buckets move (its share: %d)", n, moved, ideal)
		require.LessOrEqual(t, moved, 3*ideal+2, "%d peers: too many buckets moved when one joined", n)
	}
}

// A peer of weight 2 owns about twice the buckets of one of weight 1.
func TestBucketOwnersWeighted(t *testing.T) {
	owners := bucketOwners([]Peer{{ID: "a", Weight: 2}, {ID: "b"}, {ID: "c"}})
	counts := map[string]int{}
	for _, id := range owners {
		counts[id]++
	}
	require.Equal(t, map[string]int{"a": 32, "b": 16, "c": 16}, counts)
}

func TestOwnedBucketsNeedSelfLive(t *testing.T) {
	live := []Peer{{ID: "a"}, {ID: "b"}}
	require.Nil(t, ownedBuckets(live, "c"), "a replica that is not live owned buckets")
	a, b := ownedBuckets(live, "a"), ownedBuckets(live, "b")
	require.Len(t, append(a, b...), Buckets)
}

// member is a member of the cluster set "fleet", as a Fleet would make it.
func member(name string) *multicluster.Member {
	return multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}, multicluster.Clients{})
}

// events records what a union's subscriber is told.
type events struct {
	mu  sync.Mutex
	log []string
}

func (e *events) on(ev multicluster.MemberEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf("%s %p", ev.Type, ev.Member))
}

// A Cluster relabelled moves from one source to the other; each source tells of it in its own
// order, and the union tells of it, in every interleaving, as the sources hold it at the end.
func TestUnionAcrossInterleavings(t *testing.T) {
	key := types.NamespacedName{Namespace: "fleet", Name: "member-1"}
	a, b := member("member-1"), member("member-1")
	added := func(src int, m *multicluster.Member) func(*union) {
		return func(u *union) { u.on(src, multicluster.MemberEvent{Type: multicluster.MemberAdded, Member: m}) }
	}
	removed := func(src int, m *multicluster.Member) func(*union) {
		return func(u *union) { u.on(src, multicluster.MemberEvent{Type: multicluster.MemberRemoved, Member: m}) }
	}
	for _, c := range []struct {
		name  string
		steps []func(*union)
		want  *multicluster.Member
	}{
		{"moved: removal first", []func(*union){added(0, a), removed(0, a), added(1, b)}, b},
		{"moved: addition first", []func(*union){added(0, a), added(1, b), removed(0, a)}, b},
		// Source 1 told of b's addition late, after source 0 had it back: b went from source 1
		// before a came back to source 0, and the union must not lose a.
		{"moved back, the first move told late", []func(*union){added(0, a), removed(0, a), added(0, a), added(1, b), removed(1, b)}, a},
		{"gone from both", []func(*union){added(0, a), added(1, b), removed(0, a), removed(1, b)}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			u := newUnion()
			u.held = []map[types.NamespacedName]*multicluster.Member{{}, {}}
			for _, step := range c.steps {
				step(u)
			}
			if c.want == nil {
				require.False(t, u.Has(key))
				require.Empty(t, u.Members())
				return
			}
			require.Equal(t, []*multicluster.Member{c.want}, u.Members())
			// A subscriber now is told of it once.
			var e events
			done := make(chan struct{})
			stop := u.Subscribe(func(ev multicluster.MemberEvent) { e.on(ev); close(done) })
			<-done
			stop()
			require.Equal(t, []string{fmt.Sprintf("%s %p", multicluster.MemberAdded, c.want)}, e.log)
		})
	}
}
