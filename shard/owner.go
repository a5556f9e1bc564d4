package shard

import (
	"hash/fnv"
	"math"
)

// Peer is a live replica that takes a share of the members.
type Peer struct {
	// ID names the replica: stable while it lives, unique among the replicas (a pod's name).
	ID string
	// Weight is the replica's share relative to the others'; 0 counts as 1. A replica of weight 2
	// owns about twice the members of one of weight 1.
	Weight float64
}

// Owner is the ID of the peer that owns key (a member's "namespace/name"), or "" when there are
// no peers. Every caller that passes the same key and the same peers, in any order, gets the same
// answer.
func Owner(key string, peers []Peer) string {
	best, bestScore := "", math.Inf(1)
	for _, p := range peers {
		s := score(key, p)
		// Ties (practically never: 53 bits of hash) go to the smaller ID, whatever the order.
		if s < bestScore || (s == bestScore && p.ID < best) {
			best, bestScore = p.ID, s
		}
	}
	return best
}

// score is weighted rendezvous hashing's -ln(u)/w for the pair, u in (0, 1) from the pair's hash:
// the peer with the smallest score owns the key, and a peer's chance of that is its weight's
// share of the weights.
func score(key string, p Peer) float64 {
	u := (float64(hash(key, p.ID)>>11) + 0.5) / (1 << 53)
	return -math.Log(u) / weightOf(p)
}

// weightOf is p's Weight, 0 (or less) counting as 1.
func weightOf(p Peer) float64 {
	if p.Weight <= 0 {
		return 1
	}
	return p.Weight
}

// hash is a 64-bit hash of the pair: FNV-1a over both, with a separator no Kubernetes name holds,
// finished with MurmurHash3's 64-bit mixer. FNV-1a alone leaves the last bytes' changes in few
// bits of the result, so that keys or IDs that differ only at their end score alike.
func hash(key, id string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(id))
	return mix(h.Sum64())
}

// mix is MurmurHash3's fmix64: every bit of x affects every bit of the result.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
