package placement

import (
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Policy says which members a placement chooses; it is a Placement's spec (see
// v1alpha1.PlacementSpec for its fields). Its zero value chooses every Ready candidate. It reads
// from JSON or YAML as a Placement's spec does (a policy file, for a dry run).
type Policy = v1alpha1.PlacementSpec

// Spread spreads the chosen members across the values of a label (a region, a zone).
type Spread = v1alpha1.PlacementSpread

// Toleration keeps a chosen member chosen while its Ready condition is not True, with a reason.
type Toleration = v1alpha1.PlacementToleration

// Compiled is a Policy checked and ready to decide with: its selector parsed and its CEL
// compiled, once.
type Compiled struct {
	policy   Policy
	selector labels.Selector
	// selectorMiss is the explanation of a Cluster the selector leaves out, said once.
	selectorMiss string
	cel          *program
	prefer       []preference
	// maxAge is how old status.resources may be for fit and prefer to judge them.
	maxAge time.Duration
	// cooldown is the least time between two rebalances that move members.
	cooldown time.Duration
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
		prg, err := compileBool(p.CEL)
		if err != nil {
			errs = append(errs, fmt.Errorf("cel: %w", err))
		}
		c.cel = prg
	}
	errs = append(errs, c.compileResources(p)...)
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
	c.selectorMiss = fmt.Sprintf("labels do not match the selector %s", c.selector)
	return c, nil
}

// compileResources checks and prepares what judges status.resources: fit, prefer, their bound
// of age, and rebalance.
func (c *Compiled) compileResources(p Policy) []error {
	prefer, errs := compilePrefer(p.Prefer)
	c.prefer = prefer
	if f := p.Fit; f != nil {
		for field, list := range map[string]corev1.ResourceList{"fit.total": f.Total, "fit.perNode": f.PerNode} {
			for _, name := range sortedNames(list) {
				if q := list[name]; q.Sign() < 0 {
					errs = append(errs, fmt.Errorf("%s.%s: %s is negative", field, name, q.String()))
				}
			}
		}
	}
	c.maxAge = time.Duration(v1alpha1.DefaultMaxResourceAgeSeconds) * time.Second
	if a := p.MaxResourceAgeSeconds; a != nil {
		if *a < 1 {
			errs = append(errs, fmt.Errorf("maxResourceAgeSeconds: %d, want 1 or more", *a))
		}
		c.maxAge = time.Duration(*a) * time.Second
	}
	if r := p.Rebalance; r != nil {
		c.cooldown = time.Duration(v1alpha1.DefaultRebalanceCooldownSeconds) * time.Second
		if r.CooldownSeconds != nil {
			if *r.CooldownSeconds < 60 {
				errs = append(errs, fmt.Errorf("rebalance.cooldownSeconds: %d, want 60 or more", *r.CooldownSeconds))
			}
			c.cooldown = time.Duration(*r.CooldownSeconds) * time.Second
		}
		if len(p.Prefer) == 0 {
			errs = append(errs, errors.New("rebalance: needs prefer (it moves members to better-scored ones, and without prefer none scores)"))
		}
	}
	return errs
}

// Prefers reports whether the policy scores its candidates (it has preferences): each
// Explanation then has its Score, where one could be computed.
func (c *Compiled) Prefers() bool { return len(c.prefer) > 0 }

// names reports whether list names key, as "set/name" or "name".
func names(list []string, key types.NamespacedName) bool {
	return slices.Contains(list, key.String()) || slices.Contains(list, key.Name)
}

// tolerated reports whether a chosen member whose Ready condition is cond (not True) stays
// chosen at now, and until when (zero: for as long as the reason lasts). The time counts from the
// condition's last transition, which the health controller moves only when Ready's status
// changes: an outage that passes through several reasons is measured from its start.
func (c *Compiled) tolerated(cond *metav1.Condition, now time.Time) (bool, time.Time) {
	reason := v1alpha1.ReasonNotProbed // a Cluster with no Ready condition has not been probed
	since := time.Time{}
	if cond != nil {
		reason, since = cond.Reason, cond.LastTransitionTime.Time
	}
	if reason == v1alpha1.ReasonIdentityChanged {
		return false, time.Time{}
	}
	for _, t := range c.tolerations(reason) {
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

// tolerations are the policy's tolerations of reason: those that name it (or every reason), or,
// when none does and reason is an outage's, the default toleration.
func (c *Compiled) tolerations(reason string) []Toleration {
	var out []Toleration
	for _, t := range c.policy.Tolerations {
		if t.Reason == "" || t.Reason == reason {
			out = append(out, t)
		}
	}
	if len(out) == 0 && slices.Contains(v1alpha1.OutageReasons, reason) {
		out = append(out, Toleration{Reason: reason, Seconds: ptr.To(v1alpha1.DefaultTolerationSeconds)})
	}
	return out
}

// Tolerations are the tolerations c decides with: the policy's own, then a default one
// (DefaultTolerationSeconds) for each outage reason that none of them names. explain-placement
// shows them.
func (c *Compiled) Tolerations() []Toleration {
	out := slices.Clone(c.policy.Tolerations)
	for _, r := range v1alpha1.OutageReasons {
		if !slices.ContainsFunc(c.policy.Tolerations, func(t Toleration) bool { return t.Reason == "" || t.Reason == r }) {
			out = append(out, c.tolerations(r)...)
		}
	}
	return out
}
