package scheduler

import (
	"cmp"
	"slices"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/placement"
)

// A Placement's status.scores say what the decision weighed as it chose: the scores of its
// members (and of the best it left out) at that moment. A score moves with the member's
// capacity, and writing it as it moves would write status on every Pod, so the scores are
// written again only when the members they list as chosen change.

// scoresOf is the status.scores a Placement should have after d: prev while the members it lists
// as chosen still are, and as many are chosen with a score; otherwise d's own.
func scoresOf(prev []v1alpha1.PlacementScore, d *placement.Decision) []v1alpha1.PlacementScore {
	chosen := map[string]bool{}
	for _, c := range d.Chosen {
		chosen[c.Cluster.Name] = true
	}
	scored := 0
	for _, e := range d.Explanations {
		if e.Score != nil && e.Reason.Chosen() {
			scored++
		}
	}
	if scored == 0 && !slices.ContainsFunc(d.Explanations, func(e placement.Explanation) bool { return e.Score != nil }) {
		return nil // no prefer, or no candidate scored
	}
	if keeps(prev, chosen, min(scored, v1alpha1.MaxPlacementScoresChosen)) {
		return prev
	}
	in := best{limit: v1alpha1.MaxPlacementScoresChosen}
	out := best{limit: v1alpha1.MaxPlacementScoresLeftOut}
	for _, e := range d.Explanations {
		switch {
		case e.Score == nil:
		case e.Reason.Chosen():
			in.add(e)
		default:
			out.add(e)
		}
	}
	scores := make([]v1alpha1.PlacementScore, 0, len(in.top)+len(out.top))
	for _, e := range append(in.top, out.top...) {
		scores = append(scores, v1alpha1.PlacementScore{Cluster: e.Cluster.Name, Score: placement.FormatScore(*e.Score), Reason: writtenReason(e.Reason)})
	}
	return scores
}

// keeps reports whether prev still says the decision's members: it lists want members as chosen,
// each of them in chosen.
func keeps(prev []v1alpha1.PlacementScore, chosen map[string]bool, want int) bool {
	if len(prev) == 0 {
		return false
	}
	n := 0
	for _, s := range prev {
		if !placement.Reason(s.Reason).Chosen() {
			continue
		}
		if !chosen[s.Cluster] {
			return false
		}
		n++
	}
	return n == want
}

// best keeps the limit best-scored explanations it is given, the highest first, ties by name:
// a bounded insertion, since a Placement may weigh 10,000 candidates and list 90.
type best struct {
	limit int
	top   []placement.Explanation
}

func (b *best) add(e placement.Explanation) {
	i, _ := slices.BinarySearchFunc(b.top, e, byScore)
	if i >= b.limit {
		return
	}
	if len(b.top) == b.limit {
		b.top = b.top[:b.limit-1]
	}
	b.top = slices.Insert(b.top, i, e)
}

// byScore orders explanations the highest score first, then by name.
func byScore(a, b placement.Explanation) int {
	if c := cmp.Compare(*b.Score, *a.Score); c != 0 {
		return c
	}
	return cmp.Compare(a.Cluster.Name, b.Cluster.Name)
}
