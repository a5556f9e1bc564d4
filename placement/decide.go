package placement

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Choice is one chosen member, in a decision's order.
type Choice struct {
	Cluster types.NamespacedName
	// Group is its rollout group, from 0; 0 for all without RolloutGroupSize.
	Group  int
	Reason Reason
}

// Input is what a decision is made from.
type Input struct {
	// Key names the placement ("namespace/name"): it seeds the order in which equal candidates
	// are chosen, so that placements of one count spread over the fleet rather than all choose
	// the same members.
	Key string
	// Candidates are the Clusters to choose from, with their status.
	Candidates []*v1alpha1.Cluster
	// Previous is the last decision's choices; nil for a first decision.
	Previous []Choice
	// Now is the time tolerations, and the age of status.resources, are judged at.
	Now time.Time
	// LastRebalance is when a rebalance last moved members (the Placement's
	// status.lastRebalanceTime); zero if none has.
	LastRebalance time.Time
}

// Decision is what Decide chose, and why.
type Decision struct {
	// Chosen are the chosen members: the kept ones in their previous order, then the new ones
	// in the order they were chosen.
	Chosen []Choice
	// Explanations are every candidate's reason, by cluster set and name.
	Explanations []Explanation
	// Satisfied: Count members were chosen (always, without Count).
	Satisfied bool
	// RecheckAt, if not zero, is when a toleration or a rebalance's cooldown ends: decide again
	// then, even if nothing else changes.
	RecheckAt time.Time
	// Rebalanced: members chosen before gave way to better-scored ones, by the policy's
	// rebalance (record Now as the Placement's status.lastRebalanceTime).
	Rebalanced bool
}

// candidate is a Cluster that fits the policy, on its way to be chosen or not.
type candidate struct {
	key      types.NamespacedName
	index    int // its place among the sorted candidates, and so its explanation's
	domain   string
	previous int // its index in Previous; -1 when new
	group    int // its previous group
	included bool
	until    time.Time // a toleration's end
	tolerate bool
	rank     uint64
	// note is said of it when chosen: that whether it still fits is not known.
	note string
	// score is its score by the policy's preferences, when scored; otherwise unscored says
	// why not, and unscoredMsg in words.
	score       float64
	scored      bool
	unscored    Reason
	unscoredMsg string
}

// byName orders Clusters by cluster set, then name: the order of a decision's explanations.
func byName(a, b *v1alpha1.Cluster) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Decide chooses from in.Candidates as c says, keeping what in.Previous chose while it still
// fits. It is deterministic: the same inputs give the same decision, in the same order.
//
// Its cost is linear in the candidates (after a sort, skipped when they come sorted by cluster
// set and name, as a Fleet's members do): a scheduler decides every placement over every member
// of its cluster set, so each candidate screened out costs a selector match and nothing more.
func (c *Compiled) Decide(in Input) Decision {
	p := &c.policy
	previous := make(map[types.NamespacedName]int, len(in.Previous))
	for i, ch := range in.Previous {
		previous[ch.Cluster] = i
	}
	clusters := in.Candidates
	if !slices.IsSortedFunc(clusters, byName) {
		clusters = slices.Clone(clusters)
		slices.SortFunc(clusters, byName)
	}
	var d Decision
	// explanations[i] is clusters[i]'s; one with no Reason is a duplicate, left out.
	explanations := make([]Explanation, len(clusters))
	out := func(i int, r Reason, msg string) {
		explanations[i] = Explanation{Cluster: types.NamespacedName{Namespace: clusters[i].Namespace, Name: clusters[i].Name}, Reason: r, Message: msg}
	}
	var fits []*candidate
	for i, cl := range clusters {
		if i > 0 && byName(clusters[i-1], cl) == 0 {
			continue // the same Cluster given twice
		}
		f, r, msg := c.fit(cl, i, in, previous)
		if f == nil {
			out(i, r, msg)
			continue
		}
		fits = append(fits, f)
	}

	chosen, rebalanced, recheck := c.chooseOrRebalance(fits, in, func(f *candidate, r Reason, msg string) { out(f.index, r, msg) })
	d.Rebalanced, d.RecheckAt = rebalanced, recheck
	for _, f := range chosen {
		r, msg := chosenFor(f)
		out(f.index, r, msg)
		if f.tolerate && !f.until.IsZero() && (d.RecheckAt.IsZero() || f.until.Before(d.RecheckAt)) {
			d.RecheckAt = f.until
		}
		d.Chosen = append(d.Chosen, Choice{Cluster: f.key, Reason: r})
	}
	for _, f := range fits {
		if f.scored {
			explanations[f.index].Score = &f.score
		}
	}
	c.group(d.Chosen, chosen)
	d.Satisfied = p.Count == nil || len(d.Chosen) == int(*p.Count)
	d.Explanations = slices.DeleteFunc(explanations, func(e Explanation) bool { return e.Reason == "" })
	return d
}

// fit is cl (clusters[i]) as a candidate that fits the policy, or nil and why it does not: it is
// screened out, not Ready beyond what the policy tolerates, lacks the spread's label, or lacks
// the room fit asks.
func (c *Compiled) fit(cl *v1alpha1.Cluster, i int, in Input, previous map[types.NamespacedName]int) (*candidate, Reason, string) {
	p := &c.policy
	key := types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}
	view := &seen{c: c, cl: cl, now: in.Now}
	if r, msg := c.screen(cl, key, view.variables); r != "" {
		if r == ReasonCEL && strings.HasPrefix(msg, celFailed) {
			if _, why, figuresMsg := view.figures(); why != "" {
				msg += " (" + figuresMsg + ")" // the expression read figures it was not given
			}
		}
		return nil, r, msg
	}
	f := &candidate{key: key, index: i, previous: -1, included: names(p.Include, key)}
	if j, ok := previous[key]; ok {
		f.previous, f.group = j, in.Previous[j].Group
	}
	if cond := cl.Status.Condition(v1alpha1.ConditionReady); cond == nil || cond.Status != metav1.ConditionTrue {
		state := readiness(cond, in.Now)
		if f.previous < 0 {
			return nil, ReasonNotReady, state + "; a member is first chosen only once Ready"
		}
		ok, until := c.tolerated(cond, in.Now)
		if !ok {
			return nil, ReasonNotReady, state + ", beyond the policy's tolerations"
		}
		f.tolerate, f.until = true, until
	}
	if s := p.Spread; s != nil {
		v, ok := cl.Labels[s.Label]
		if !ok {
			return nil, ReasonSpread, "no " + s.Label + " label, which the spread needs"
		}
		f.domain = v
	}
	res, why, figuresMsg := view.figures()
	if r, msg := c.room(f, res, why, figuresMsg); r != "" {
		return nil, r, msg
	}
	if len(c.prefer) > 0 {
		f.score, f.unscored, f.unscoredMsg = c.score(view.variables(), why, figuresMsg)
		f.scored = f.unscored == ""
	}
	f.rank = rank(in.Key, key)
	return f, "", ""
}

// room is why f lacks the room the policy's fit asks, by res, its figures (nil, with resWhy and
// resMsg, when they cannot be judged); "" when it has it. A member chosen before whose figures
// cannot be judged stays, with a note.
func (c *Compiled) room(f *candidate, res *v1alpha1.ClusterResources, resWhy Reason, resMsg string) (Reason, string) {
	if c.policy.Fit == nil {
		return "", ""
	}
	kept := f.previous >= 0
	switch {
	case res == nil && kept:
		f.note = "whether it still fits is not known: " + resMsg
		return "", ""
	case res == nil:
		return resWhy, resMsg + ", so whether it fits is not known"
	}
	if why := c.fits(res, kept); why != "" {
		if kept {
			return ReasonDoesNotFit, "chosen before, and no longer fits: " + why
		}
		return ReasonDoesNotFit, why
	}
	return "", ""
}

// celFailed begins the explanation of a Cluster for which the CEL expression could not be
// evaluated.
const celFailed = "the CEL expression could not be evaluated"

// readsResources reports whether the policy judges status.resources.
func (c *Compiled) readsResources() bool {
	return c.cel != nil || c.policy.Fit != nil || len(c.prefer) > 0
}

// chosenFor is why a chosen candidate was chosen, and in words.
func chosenFor(f *candidate) (Reason, string) {
	r, msg := ReasonChosen, "fits the policy"
	switch {
	case f.tolerate:
		r, msg = ReasonTolerated, "chosen before; not Ready, tolerated"
		if !f.until.IsZero() {
			msg += " until " + f.until.UTC().Format(time.RFC3339)
		}
	case f.previous >= 0:
		r, msg = ReasonKept, "chosen before, and still fits"
	case f.included:
		r, msg = ReasonIncluded, "named in include"
	}
	if f.note != "" {
		msg += " (" + f.note + ")"
	}
	switch {
	case f.scored:
		msg += "; score " + FormatScore(f.score)
	case f.unscored != "":
		msg += "; " + f.unscoredMsg
	}
	return r, msg
}

// Candidate reports whether cl is a candidate of the policy at all: not excluded, of its cluster
// sets, and matching its selector and CEL expression (or included by name). Readiness, count,
// spread and fit are not judged; the age of status.resources, which CEL may read, is judged at
// the time of the call. A scheduler asks it of a Cluster that changed, to know which
// placements to decide again.
func (c *Compiled) Candidate(cl *v1alpha1.Cluster) bool {
	r, _ := c.screen(cl, types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}, func() map[string]any {
		res, _, _ := c.figures(cl, time.Now())
		return clusterVars(cl, res)
	})
	return r == ""
}

// screen is why cl is not a candidate at all, and in words; "" when it is one. vars makes what
// the CEL expression sees of it, when it is asked.
func (c *Compiled) screen(cl *v1alpha1.Cluster, key types.NamespacedName, vars func() map[string]any) (Reason, string) {
	p := &c.policy
	included := names(p.Include, key)
	switch {
	case names(p.Exclude, key):
		return ReasonExcluded, "named in exclude"
	case !included && !c.selector.Matches(labels.Set(cl.Labels)):
		return ReasonSelector, c.selectorMiss
	}
	if c.cel != nil && !included {
		ok, err := c.cel.eval(vars())
		if err != nil {
			return ReasonCEL, fmt.Sprintf("%s: %v", celFailed, err)
		}
		if !ok {
			return ReasonCEL, "the CEL expression is false"
		}
	}
	return "", ""
}

// spread picks from rest, after chosen (those kept), up to room: the domain with fewest chosen
// first, while no domain exceeds the one with fewest (among those with candidates) by more than
// MaxSkew. Those not picked are explained with out.
func (c *Compiled) spread(chosen, rest []*candidate, room int, out func(*candidate, Reason, string)) []*candidate {
	p := &c.policy
	overCount := fmt.Sprintf("count is %d, and %d members came first", room, room)
	skew := int(max(p.Spread.MaxSkew, 1))
	count, waiting := map[string]int{}, map[string][]*candidate{}
	for _, f := range chosen {
		count[f.domain]++
	}
	for _, f := range rest {
		waiting[f.domain] = append(waiting[f.domain], f)
		count[f.domain] += 0
	}
	fewest := func() int {
		least := math.MaxInt
		for _, n := range count {
			least = min(least, n)
		}
		return least
	}
	for len(chosen) < room {
		next := ""
		found := false
		for dom, w := range waiting {
			if len(w) > 0 && (!found || count[dom] < count[next] || count[dom] == count[next] && dom < next) {
				next, found = dom, true
			}
		}
		if !found || count[next]+1-fewest() > skew {
			break
		}
		chosen = append(chosen, waiting[next][0])
		waiting[next] = waiting[next][1:]
		count[next]++
	}
	for _, w := range waiting {
		for _, f := range w {
			if len(chosen) >= room {
				out(f, ReasonOverCount, overCount)
			} else {
				out(f, ReasonSpread, fmt.Sprintf("%s=%s has %d chosen, and the domain with fewest %d: one more exceeds maxSkew %d",
					p.Spread.Label, f.domain, count[f.domain], fewest(), skew))
			}
		}
	}
	return chosen
}

// group gives each choice its rollout group: the one it had, while it has room, else the first
// group with room, in order.
func (c *Compiled) group(choices []Choice, chosen []*candidate) {
	if c.policy.RolloutGroupSize == nil {
		return
	}
	size := int(*c.policy.RolloutGroupSize)
	members := map[int]int{}
	placed := make([]bool, len(choices))
	for i, f := range chosen {
		if f.previous >= 0 && members[f.group] < size {
			choices[i].Group = f.group
			members[f.group]++
			placed[i] = true
		}
	}
	g := 0
	for i := range choices {
		if placed[i] {
			continue
		}
		for members[g] >= size {
			g++
		}
		choices[i].Group = g
		members[g]++
	}
}

// readiness says what a Ready condition that is not True says, and for how long.
func readiness(cond *metav1.Condition, now time.Time) string {
	if cond == nil {
		return "not probed yet (no Ready condition)"
	}
	return fmt.Sprintf("Ready is %s (%s) for %s", cond.Status, cond.Reason, now.Sub(cond.LastTransitionTime.Time).Round(time.Second))
}

// rank orders candidates that are otherwise equal, by a hash of the placement and the Cluster:
// stable for a pair, and different from one placement to the next.
func rank(placement string, key types.NamespacedName) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(placement))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key.String()))
	x := h.Sum64()
	// FNV's low bits mix poorly for keys that differ at the end (member-1, member-2): finish
	// with murmur3's fmix64.
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9f34f9bdb53
	x ^= x >> 33
	return x
}
