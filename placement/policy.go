package placement

import (
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Policy says which members a placement chooses. Its zero value chooses every Ready candidate.
// It reads from JSON or YAML as a Placement's spec does (a policy file, for a dry run).
type Policy struct {
	// ClusterSets are the cluster sets (namespaces) whose Clusters are candidates; every set
	// of the candidates given when empty.
	ClusterSets []string `json:"clusterSets,omitempty"`
	// Selector keeps the Clusters whose labels match; all when nil.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// CEL, if set, keeps the Clusters for which it is true. It sees `cluster`, with `name`,
	// `namespace`, `labels`, `annotations`, `version` (status.version) and `ready` (`status`
	// and `reason` of the Ready condition), for example
	// `cluster.labels["tier"] == "gold" && cluster.version.startsWith("v1.3")`.
	CEL string `json:"cel,omitempty"`
	// Include names Clusters ("set/name", or "name" in every set) that are candidates whatever
	// Selector and CEL say; they are chosen before others. Exclude and readiness still apply.
	Include []string `json:"include,omitempty"`
	// Exclude names Clusters ("set/name", or "name" in every set) that are never chosen.
	Exclude []string `json:"exclude,omitempty"`
	// Count, if set, chooses at most that many; every fitting candidate when nil.
	Count *int32 `json:"count,omitempty"`
	// Spread, with Count, spreads the chosen across the values of a label.
	Spread *Spread `json:"spread,omitempty"`
	// Tolerations keep a chosen member chosen while it is not Ready, for a time, by the reason
	// of its Ready condition. A member not chosen before is never chosen while not Ready, and
	// one whose endpoint leads to another cluster (IdentityChanged) leaves at once whatever the
	// tolerations say.
	Tolerations []Toleration `json:"tolerations,omitempty"`
	// RolloutGroups, if set, puts the chosen into groups of at most this size, in order, for
	// rollouts in stages; a member keeps its group while it stays chosen.
	RolloutGroupSize *int32 `json:"rolloutGroupSize,omitempty"`
}

// Spread spreads the chosen members across the values of a label (a region, a zone).
type Spread struct {
	// Label is the label whose values are the domains. A Cluster without it is not chosen.
	Label string `json:"label"`
	// MaxSkew is how many more members one domain may have than the one with fewest, among the
	// domains that have candidates; 1 when zero.
	MaxSkew int32 `json:"maxSkew,omitempty"`
}

// Toleration keeps a chosen member chosen while its Ready condition is not True, with Reason.
type Toleration struct {
	// Reason is the Ready condition's reason tolerated (Unreachable, NotProbed, ...); every
	// reason when empty, IdentityChanged excepted.
	Reason string `json:"reason,omitempty"`
	// Seconds is how long after the condition's last transition the member stays chosen; for
	// as long as the reason lasts when nil.
	Seconds *int64 `json:"seconds,omitempty"`
}

// Compiled is a Policy checked and ready to decide with: its selector parsed and its CEL
// compiled, once.
type Compiled struct {
	policy   Policy
	selector labels.Selector
	cel      *program
}

// Compile checks p and prepares it. Its errors name the field at fault, and what is wrong.
func Compile(p Policy) (*Compiled, error) {
	c := &Compiled{policy: p, selector: labels.Everything()}
	var errs []error
	if p.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Selector)
		if err != nil {
			errs = append(errs, fmt.Errorf("selector: %w", err))
		} else {
			c.selector = s
		}
	}
	if p.CEL != "" {
		prg, err := compileCEL(p.CEL)
		if err != nil {
			errs = append(errs, fmt.Errorf("cel: %w", err))
		}
		c.cel = prg
	}
	if p.Count != nil && *p.Count < 0 {
		errs = append(errs, fmt.Errorf("count: %d is negative", *p.Count))
	}
	if s := p.Spread; s != nil {
		if s.Label == "" {
			errs = append(errs, errors.New("spread.label: required"))
		}
		if s.MaxSkew < 0 {
			errs = append(errs, fmt.Errorf("spread.maxSkew: %d is negative", s.MaxSkew))
		}
		if p.Count == nil {
			errs = append(errs, errors.New("spread: needs count (without one, every fitting candidate is chosen, whatever its domain)"))
		}
	}
	for i, t := range p.Tolerations {
		if t.Seconds != nil && *t.Seconds < 0 {
			errs = append(errs, fmt.Errorf("tolerations[%d].seconds: %d is negative", i, *t.Seconds))
		}
		if t.Reason == v1alpha1.ReasonIdentityChanged {
			errs = append(errs, fmt.Errorf("tolerations[%d].reason: %s is never tolerated: the member's endpoint leads to another cluster", i, t.Reason))
		}
	}
	if g := p.RolloutGroupSize; g != nil && *g < 1 {
		errs = append(errs, fmt.Errorf("rolloutGroupSize: %d, want 1 or more", *g))
	}
	for _, f := range []struct {
		name  string
		names []string
	}{{"include", p.Include}, {"exclude", p.Exclude}} {
		for i, n := range f.names {
			if n == "" || n[0] == '/' || n[len(n)-1] == '/' {
				errs = append(errs, fmt.Errorf("%s[%d]: %q, want NAME or SET/NAME", f.name, i, n))
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("placement policy: %w", errors.Join(errs...))
	}
	return c, nil
}

// names reports whether list names key, as "set/name" or "name".
func names(list []string, key types.NamespacedName) bool {
	return slices.Contains(list, key.String()) || slices.Contains(list, key.Name)
}

// tolerated reports whether a chosen member whose Ready condition is cond (not True) stays
// chosen at now, and until when (zero: for as long as the reason lasts).
func (c *Compiled) tolerated(cond *metav1.Condition, now time.Time) (bool, time.Time) {
	reason := v1alpha1.ReasonNotProbed // a Cluster with no Ready condition has not been probed
	since := time.Time{}
	if cond != nil {
		reason, since = cond.Reason, cond.LastTransitionTime.Time
	}
	if reason == v1alpha1.ReasonIdentityChanged {
		return false, time.Time{}
	}
	for _, t := range c.policy.Tolerations {
		if t.Reason != "" && t.Reason != reason {
			continue
		}
		if t.Seconds == nil {
			return true, time.Time{}
		}
		until := since.Add(time.Duration(*t.Seconds) * time.Second)
		if now.Before(until) {
			return true, until
		}
	}
	return false, time.Time{}
}
