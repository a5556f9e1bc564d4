package placement

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"
)

// chooseOrRebalance picks from fits as choose does, or, when the policy's rebalance is due,
// afresh by score: members chosen before then give way to better-scored candidates (they win
// ties), and rebalanced says whether one did. While a cooldown holds, recheck is its end if a
// rebalance would move members then.
func (c *Compiled) chooseOrRebalance(fits []*candidate, in Input, out func(*candidate, Reason, string)) (chosen []*candidate, rebalanced bool, recheck time.Time) {
	if c.policy.Rebalance == nil || len(c.prefer) == 0 {
		return c.choose(fits, false, out), false, time.Time{}
	}
	due := in.LastRebalance.Add(c.cooldown)
	if in.LastRebalance.IsZero() || !in.Now.Before(due) {
		chosen = c.choose(fits, true, func(f *candidate, r Reason, msg string) {
			if f.previous >= 0 && f.scored && r == ReasonOverCount {
				r, msg = ReasonRebalanced, fmt.Sprintf("chosen before; gave way, by rebalance, to candidates of higher score (%s)", scoreOf(f))
				rebalanced = true
			}
			out(f, r, msg)
		})
		return chosen, rebalanced, time.Time{}
	}
	would := false
	c.choose(slices.Clone(fits), true, func(f *candidate, r Reason, _ string) {
		would = would || f.previous >= 0 && f.scored && r == ReasonOverCount
	})
	if would {
		recheck = due
	}
	return c.choose(fits, false, out), false, recheck
}

// scoreOf says f's score, or that it has none.
func scoreOf(f *candidate) string {
	if !f.scored {
		return "it has none"
	}
	return "its score " + FormatScore(f.score)
}

// choose picks from fits: the members chosen before first, in their previous order (unless
// rebalancing), then the included ones, then the rest by score and rank, up to Count and, with
// Spread, within its skew. Those not picked are explained with out. The chosen come in the
// decision's order: those chosen before in their previous order, then the new ones.
func (c *Compiled) choose(fits []*candidate, rebalancing bool, out func(*candidate, Reason, string)) []*candidate {
	p := &c.policy
	room := math.MaxInt
	if p.Count != nil {
		room = int(*p.Count)
	}
	out = explainUnscored(out)
	slices.SortStableFunc(fits, c.preferred(rebalancing))
	var chosen []*candidate
	rest := fits
	// Members chosen before stay, spread or not: moving them to even out domains, or to a
	// better score, is the churn a placement must not make unless its rebalance asks. Only a
	// lower Count drops some, the last first.
	for len(rest) > 0 && rest[0].fixed(rebalancing) {
		if len(chosen) < room {
			chosen = append(chosen, rest[0])
		} else {
			out(rest[0], ReasonOverCount, fmt.Sprintf("count is %d, and %d members chosen before come first", room, room))
		}
		rest = rest[1:]
	}
	if p.Spread == nil {
		overCount := fmt.Sprintf("count is %d, and %d members came first", room, room)
		for _, f := range rest {
			if len(chosen) < room {
				chosen = append(chosen, f)
			} else {
				out(f, ReasonOverCount, overCount)
			}
		}
	} else {
		chosen = c.spread(chosen, rest, room, out)
	}
	if rebalancing {
		slices.SortStableFunc(chosen, func(a, b *candidate) int {
			return cmp.Compare(orMax(a.previous), orMax(b.previous))
		})
	}
	return chosen
}

// orMax is a previous index, with new candidates (-1) after every one chosen before.
func orMax(previous int) int {
	if previous < 0 {
		return math.MaxInt
	}
	return previous
}

// explainUnscored wraps out so that a candidate left out by the count after scored members
// says it was not scored, and why, in place of OverCount.
func explainUnscored(out func(*candidate, Reason, string)) func(*candidate, Reason, string) {
	return func(f *candidate, r Reason, msg string) {
		if r == ReasonOverCount && f.unscored != "" {
			r, msg = f.unscored, f.unscoredMsg+"; scored members came first"
		}
		out(f, r, msg)
	}
}

// fixed reports whether f, chosen before, is kept before any other is considered: always
// unless rebalancing, and then when it has no score to compete with (its figures unknown or
// too old: whether it should give way is not known).
func (f *candidate) fixed(rebalancing bool) bool {
	return f.previous >= 0 && (!rebalancing || !f.scored)
}

// preferred orders candidates as choose takes them: those chosen before, in their previous
// order (when rebalancing, those without a score alone); then those included by name; then, with preferences, the scored
// by score, higher first (those chosen before first among equals when rebalancing), before the
// unscored; then by rank.
func (c *Compiled) preferred(rebalancing bool) func(a, b *candidate) int {
	return func(a, b *candidate) int {
		switch {
		case a.fixed(rebalancing) != b.fixed(rebalancing): // kept ones first
			return before(a.fixed(rebalancing))
		case a.fixed(rebalancing):
			return cmp.Compare(a.previous, b.previous)
		case a.included != b.included:
			return before(a.included)
		case a.included:
			return cmp.Compare(a.key.String(), b.key.String())
		case a.scored != b.scored:
			return before(a.scored)
		case a.scored && a.score != b.score:
			return -cmp.Compare(a.score, b.score)
		case rebalancing && (a.previous >= 0) != (b.previous >= 0):
			return before(a.previous >= 0)
		}
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.key.String(), b.key.String()))
	}
}

// before is -1 when the first of two candidates goes first by a test it passes (first) and
// the other fails, 1 otherwise.
func before(first bool) int {
	if first {
		return -1
	}
	return 1
}
