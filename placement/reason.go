package placement

import "k8s.io/apimachinery/pkg/types"

// Reason is the one primary reason a candidate is in or out of a decision.
type Reason string

// Reasons a candidate is chosen.
const (
	// ReasonKept: chosen before, and it still fits.
	ReasonKept Reason = "Kept"
	// ReasonTolerated: chosen before, not Ready, and a toleration for its Ready reason holds.
	ReasonTolerated Reason = "Tolerated"
	// ReasonIncluded: named in the policy's Include, and there was room.
	ReasonIncluded Reason = "Included"
	// ReasonChosen: it fits, and there was room.
	ReasonChosen Reason = "Chosen"
)

// Reasons a candidate is not chosen.
const (
	// ReasonExcluded: named in the policy's Exclude.
	ReasonExcluded Reason = "Excluded"
	// ReasonSelector: its labels do not match the policy's Selector.
	ReasonSelector Reason = "Selector"
	// ReasonCEL: the policy's CEL expression is false for it, or could not be evaluated.
	ReasonCEL Reason = "CEL"
	// ReasonNotReady: its Ready condition is not True, and no toleration holds (or it was not
	// chosen before: a member is first chosen only once Ready).
	ReasonNotReady Reason = "NotReady"
	// ReasonOverCount: it fits, but Count members were chosen before it.
	ReasonOverCount Reason = "OverCount"
	// ReasonSpread: it lacks the spread label, or choosing it would make its domain exceed the
	// policy's MaxSkew.
	ReasonSpread Reason = "Spread"
	// ReasonDoesNotFit: it lacks the free room the policy's fit asks, in total or on one Node
	// (or, chosen before, its allocatable no longer holds it).
	ReasonDoesNotFit Reason = "DoesNotFit"
	// ReasonResourcesUnknown: it has no status.resources, which fit or prefer needs.
	ReasonResourcesUnknown Reason = "ResourcesUnknown"
	// ReasonResourcesStale: its status.resources are older than the policy's
	// maxResourceAgeSeconds, so fit and prefer do not judge it.
	ReasonResourcesStale Reason = "ResourcesStale"
	// ReasonUnscored: a preference could not be evaluated for it, and scored candidates filled
	// the count.
	ReasonUnscored Reason = "Unscored"
	// ReasonRebalanced: chosen before, it gave way to a candidate of higher score, by the
	// policy's rebalance.
	ReasonRebalanced Reason = "Rebalanced"
)

// Chosen reports whether r is a reason to be in the decision.
func (r Reason) Chosen() bool {
	switch r {
	case ReasonKept, ReasonTolerated, ReasonIncluded, ReasonChosen:
		return true
	}
	return false
}

// Explanation is why one candidate is in or out.
type Explanation struct {
	Cluster types.NamespacedName
	Reason  Reason
	// Message says it in words, naming what decided: the selector, the reason and age of a
	// Ready condition, the domain and its count, what it lacks of fit.
	Message string
	// Score is its score by the policy's preferences; nil without preferences, or when it
	// could not be scored.
	Score *float64
}
