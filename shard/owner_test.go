package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	mcrsharder "sigs.k8s.io/multicluster-runtime/pkg/manager/coordinator/sharded/sharder"
)

// keys are n member keys as a registry names them.
func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("fleet/member-%05d", i)
	}
	return out
}

// statefulSet and random are the replica names the targets name: x-0, x-1, ... and pod names with
// random suffixes, as a Deployment's.
func statefulSet(n int) []Peer {
	out := make([]Peer, n)
	for i := range out {
		out[i] = Peer{ID: fmt.Sprintf("clusterregistry-controllers-%d", i)}
	}
	return out
}

func random(n int, r *rand.Rand) []Peer {
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	out := make([]Peer, n)
	for i := range out {
		b := []byte("clusterregistry-controllers-7d9f8b6c5d-")
		for range 5 {
			b = append(b, letters[r.IntN(len(letters))])
		}
		out[i] = Peer{ID: string(b)}
	}
	return out
}

// owners counts the members each peer owns under assign.
func owners(members []string, peers []Peer, assign func(string, []Peer) string) map[string]int {
	counts := map[string]int{}
	for _, p := range peers {
		counts[p.ID] = 0
	}
	for _, m := range members {
		counts[assign(m, peers)]++
	}
	return counts
}

// imbalance is the busiest peer's share over the mean share.
func imbalance(counts map[string]int, members int) float64 {
	busiest := 0
	for _, c := range counts {
		busiest = max(busiest, c)
	}
	return float64(busiest) / (float64(members) / float64(len(counts)))
}

// mcrOwner is multicluster-runtime v0.24.1's HRW, the peer this package measures itself beside.
func mcrOwner(key string, peers []Peer) string {
	infos := make([]mcrsharder.PeerInfo, len(peers))
	for i, p := range peers {
		infos[i] = mcrsharder.PeerInfo{ID: p.ID, Weight: uint32(max(p.Weight, 0))}
	}
	h := mcrsharder.NewHRW()
	for _, p := range infos {
		if h.ShouldOwn(key, infos, p) {
			return p.ID
		}
	}
	return ""
}

// Balance: with 2 to 8 replicas, StatefulSet-style or random names, over 10,000 members, the
// busiest owns at most 1.10 times the mean.
func TestBalance(t *testing.T) {
	members := keys(10_000)
	r := rand.New(rand.NewPCG(1, 2))
	for n := 2; n <= 8; n++ {
		for name, peers := range map[string][]Peer{"x-0, x-1, ...": statefulSet(n), "random": random(n, r)} {
			ours := imbalance(owners(members, peers, Owner), len(members))
			theirs := imbalance(owners(members, peers, mcrOwner), len(members))
			t.Logf("%d replicas named %s: busiest/mean %.3f (multicluster-runtime's HRW: %.3f)", n, name, ours, theirs)
			require.LessOrEqual(t, ours, 1.10, "%d replicas named %s", n, name)
		}
	}
}

// Movement: going from n to n+1 replicas moves at most 1/(n+1) + 2% of the members, and only to
// the new replica; going back moves them back.
func TestMovement(t *testing.T) {
	members := keys(10_000)
	for n := 1; n <= 7; n++ {
		before, after := statefulSet(n), statefulSet(n+1)
		moved := 0
		for _, m := range members {
			from, to := Owner(m, before), Owner(m, after)
			if from != to {
				moved++
				require.Equal(t, after[n].ID, to, "a member moved between two replicas that were both there")
			}
			require.Equal(t, from, Owner(m, before), "not deterministic")
		}
		share := float64(moved) / float64(len(members))
		t.Logf("%d -> %d replicas: %.3f of the members moved (ideal %.3f)", n, n+1, share, 1/float64(n+1))
		require.LessOrEqual(t, share, 1/float64(n+1)+0.02)
	}
}

// The answer does not depend on the order of the peers, and no peers own nothing.
func TestOwnerIsOrderFree(t *testing.T) {
	peers := statefulSet(5)
	reversed := []Peer{peers[4], peers[3], peers[2], peers[1], peers[0]}
	for _, m := range keys(1000) {
		require.Equal(t, Owner(m, peers), Owner(m, reversed))
	}
	require.Empty(t, Owner("fleet/a", nil))
}

// Weights take effect: a replica of weight 2 owns about twice what one of weight 1 does (within
// 10%). multicluster-runtime's HRW multiplies a 64-bit hash by the weight, which wraps around.
func TestWeights(t *testing.T) {
	members := keys(10_000)
	peers := random(3, rand.New(rand.NewPCG(3, 4))) // pod names, as a Deployment's
	peers[0].Weight = 2
	ratioOf := func(counts map[string]int) float64 {
		return float64(counts[peers[0].ID]) / (float64(counts[peers[1].ID]+counts[peers[2].ID]) / 2)
	}
	ratio, theirRatio := ratioOf(owners(members, peers, Owner)), ratioOf(owners(members, peers, mcrOwner))
	t.Logf("weight 2 over weight 1: %.3f (multicluster-runtime's HRW: %.3f)", ratio, theirRatio)
	require.InDelta(t, 2.0, ratio, 0.2)
}

// BenchmarkOwner reports the cost of one assignment, and the busiest replica's share over the
// mean for 3 StatefulSet replicas over 10,000 members, beside multicluster-runtime's HRW.
func BenchmarkOwner(b *testing.B) {
	members := keys(10_000)
	peers := statefulSet(3)
	for name, assign := range map[string]func(string, []Peer) string{"shard": Owner, "multicluster-runtime": mcrOwner} {
		b.Run(name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				assign(members[i%len(members)], peers)
			}
			b.ReportMetric(imbalance(owners(members, peers, assign), len(members)), "busiest/mean")
		})
	}
}
