package shard

import (
	"cmp"
	"hash/fnv"
	"math"
	"slices"
	"strconv"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// BucketLabel on a Cluster names its bucket, one of Buckets: "0" to "63". A replica of a
// NewBucketView owns whole buckets, and asks the registry for its buckets' Clusters alone (a label
// selector the registry filters by), so that it neither receives nor decodes the others' status
// writes. `clusterregistry join` and `import --shard-buckets` set it; a tool that creates Clusters sets it with
// SetBucket. A Cluster without it, or with a value that names no bucket, is still owned by exactly
// one replica, by its name, as NewView owns every member (each replica then watches it).
//
// Whoever writes a Cluster chooses its label, and so which replica probes it: that gives them
// nothing a replica could not do anyway (every replica has the same power), and at worst puts
// their Clusters on one replica.
const BucketLabel = "clusterregistry.k8s.io/shard-bucket"

// Buckets is how many buckets the members are divided into, whatever the number of replicas: a
// group of up to 64 replicas each owns at least one. It is part of the label's meaning, and does
// not change.
const Buckets = 64

// BucketOf is the bucket of the Cluster namespace/name, as BucketLabel's value: a hash of the
// name, so that Clusters fill the buckets evenly. It never changes for a name.
func BucketOf(namespace, name string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(namespace))
	_, _ = h.Write([]byte{'/'})
	_, _ = h.Write([]byte(name))
	return strconv.Itoa(int(mix(h.Sum64()) % Buckets))
}

// SetBucket labels c with its bucket (BucketOf) unless it has a BucketLabel already.
func SetBucket(c *v1alpha1.Cluster) {
	if _, ok := c.Labels[BucketLabel]; ok {
		return
	}
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[BucketLabel] = BucketOf(c.Namespace, c.Name)
}

// ClusterOwner is the ID of the peer that owns c in a group of bucket views (NewBucketView) whose
// live replicas are peers, or "" when there are none: the owner of the bucket its label names,
// or, for a Cluster in no bucket, Owner of its name. Every replica computes the same answer.
func ClusterOwner(c *v1alpha1.Cluster, peers []Peer) string {
	if b, ok := parseBucket(c.Labels[BucketLabel]); ok {
		return bucketOwners(peers)[b]
	}
	return Owner(c.Namespace+"/"+c.Name, peers)
}

// parseBucket is the bucket a BucketLabel value names: only as BucketOf writes it ("7", not "07"
// or "+7"), so that each value the registry matches exactly names one bucket, and a Cluster is in
// either one bucket's selector or the selector of those in none (bucketValues).
func parseBucket(v string) (int, bool) {
	b, err := strconv.Atoi(v)
	if err != nil || b < 0 || b >= Buckets || strconv.Itoa(b) != v {
		return 0, false
	}
	return b, true
}

// bucketValues are the label values of buckets, in order.
func bucketValues(buckets []int) []string {
	out := make([]string, len(buckets))
	for i, b := range buckets {
		out[i] = strconv.Itoa(b)
	}
	return out
}

// allBuckets are the buckets, 0 to Buckets-1.
func allBuckets() []int {
	out := make([]int, Buckets)
	for i := range out {
		out[i] = i
	}
	return out
}

// bucketOwners assigns each bucket to one of peers: rendezvous hashing, as Owner, bounded so that
// no peer owns more than its weight's share of the buckets, rounded up. Rendezvous alone would
// leave one of three replicas with a quarter more buckets than another about half the time, on
// 64 buckets; bounded, their shares differ by one bucket. Every (bucket, peer) pair is scored,
// and pairs are taken best first, a bucket going to the first peer that has room: the same answer
// for the same peers in any order, and, as peers come and go, most buckets stay where they were.
func bucketOwners(peers []Peer) [Buckets]string {
	var owners [Buckets]string
	if len(peers) == 0 {
		return owners
	}
	type pair struct {
		bucket int
		peer   int
		score  float64
	}
	var total float64
	for _, p := range peers {
		total += weightOf(p)
	}
	room := make([]int, len(peers))
	pairs := make([]pair, 0, Buckets*len(peers))
	for i, p := range peers {
		room[i] = int(math.Ceil(Buckets * weightOf(p) / total))
		for b := range Buckets {
			pairs = append(pairs, pair{bucket: b, peer: i, score: score("bucket/"+strconv.Itoa(b), p)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(peers[a.peer].ID, peers[b.peer].ID), cmp.Compare(a.bucket, b.bucket))
	})
	for _, p := range pairs {
		if owners[p.bucket] == "" && room[p.peer] > 0 {
			owners[p.bucket] = peers[p.peer].ID
			room[p.peer]--
		}
	}
	return owners
}

// ownedBuckets are the buckets self owns among live, in order: none until self is live.
func ownedBuckets(live []Peer, self string) []int {
	if !slices.ContainsFunc(live, func(p Peer) bool { return p.ID == self }) {
		return nil
	}
	var out []int
	for b, id := range bucketOwners(live) {
		if id == self {
			out = append(out, b)
		}
	}
	return out
}
