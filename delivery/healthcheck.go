package delivery

import (
	"fmt"
	"strings"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/safetext"
)

// A Release's spec.health judges the objects of the kinds it names with CEL expressions over the
// object (self), where kstatus cannot: inProgress first, then failed, then current; the first
// that holds gives the object's status, and none InProgress. An expression that cannot be
// evaluated (a field the object does not have yet, the cost limit) leaves the object InProgress,
// saying why.

// healthCostLimit bounds one evaluation, as the API server bounds a CRD's validation rules (and
// placement bounds its policies): a Release's writer cannot make the controller spin.
const healthCostLimit = 100_000

// healthChecks are a Release's compiled spec.health.
type healthChecks struct {
	// spec is the expressions as written: a change to them is judged again (recheck).
	spec   string
	byKind map[schema.GroupKind]*healthCheck
}

// healthCheck is one kind's expressions, each nil when not given.
type healthCheck struct {
	index                       int
	inProgress, failed, current cel.Program
}

// compileHealth compiles rel's spec.health; an error names the expression and says why.
func compileHealth(rel *v1alpha1.Release) (*healthChecks, error) {
	if len(rel.Spec.Health) == 0 {
		return nil, nil
	}
	env, err := cel.NewEnv(cel.Variable("self", cel.MapType(cel.StringType, cel.DynType)), cel.OptionalTypes())
	if err != nil {
		return nil, err
	}
	hc := &healthChecks{byKind: map[schema.GroupKind]*healthCheck{}}
	var spec strings.Builder
	for i, h := range rel.Spec.Health {
		fmt.Fprintf(&spec, "%s/%s:%q,%q,%q;", h.Group, h.Kind, h.InProgress, h.Failed, h.Current)
		c := &healthCheck{index: i}
		for _, e := range []struct {
			field, expr string
			into        *cel.Program
		}{{"inProgress", h.InProgress, &c.inProgress}, {"failed", h.Failed, &c.failed}, {"current", h.Current, &c.current}} {
			if e.expr == "" {
				continue
			}
			if *e.into, err = compileBool(env, e.expr); err != nil {
				return nil, fmt.Errorf("spec.health[%d].%s (%s): %w", i, e.field, schema.GroupKind{Group: h.Group, Kind: h.Kind}, err)
			}
		}
		hc.byKind[schema.GroupKind{Group: h.Group, Kind: h.Kind}] = c
	}
	hc.spec = spec.String()
	return hc, nil
}

func compileBool(env *cel.Env, expr string) (cel.Program, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType {
		return nil, fmt.Errorf("the expression is %s, want bool", t)
	}
	return env.Program(ast, cel.CostLimit(healthCostLimit))
}

// judge is u's status and message: by the Release's expression for its kind, or kstatus.
func (hc *healthChecks) judge(u *unstructured.Unstructured) (string, string) {
	if hc == nil {
		return health(u)
	}
	c := hc.byKind[u.GroupVersionKind().GroupKind()]
	if c == nil {
		return health(u)
	}
	self := map[string]any{"self": u.Object}
	for _, e := range []struct {
		field, status string
		prg           cel.Program
	}{{"inProgress", "InProgress", c.inProgress}, {"failed", "Failed", c.failed}, {"current", "Current", c.current}} {
		if e.prg == nil {
			continue
		}
		out, _, err := e.prg.Eval(self)
		if err != nil {
			return "InProgress", safetext.OneLine(fmt.Sprintf("spec.health[%d].%s: %v", c.index, e.field, err), 1024)
		}
		if b, ok := out.Value().(bool); !ok {
			return "InProgress", fmt.Sprintf("spec.health[%d].%s gave %T, not a bool", c.index, e.field, out.Value())
		} else if b {
			return e.status, fmt.Sprintf("spec.health[%d].%s holds", c.index, e.field)
		}
	}
	return "InProgress", fmt.Sprintf("none of spec.health[%d]'s expressions holds", c.index)
}

// objectRules are what a Release says of its objects on members besides applying them: how to
// judge their health (spec.health) and what to read from them (spec.feedback).
type objectRules struct {
	health   *healthChecks
	feedback []feedbackReader
	// spec is both as written: a change is judged again (recheck).
	spec string
}

// compileRules compiles rel's spec.health and spec.feedback; the error names what does not
// compile, with the reason status gives it.
func compileRules(rel *v1alpha1.Release) (objectRules, string, error) {
	hc, err := compileHealth(rel)
	if err != nil {
		return objectRules{}, "InvalidHealth", err
	}
	fb, err := compileFeedback(rel)
	if err != nil {
		return objectRules{}, "InvalidFeedback", err
	}
	r := objectRules{health: hc, feedback: fb, spec: fmt.Sprintf("%v", rel.Spec.Feedback)}
	if hc != nil {
		r.spec += hc.spec
	}
	return r, "", nil
}

// setRules keeps a Release's rules; a change is judged again at once, from the watch caches
// (recheck).
func (c *Controller) setRules(st *releaseState, r objectRules) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st.rules.spec != r.spec {
		st.rules = r
		st.checked = st.checked.AddDate(-1, 0, 0) // due now
	}
}

// rulesOf are the Release key's rules; the zero rules judge by kstatus and read nothing.
func (c *Controller) rulesOf(key types.NamespacedName) objectRules {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.releases[key]; st != nil {
		return st.rules
	}
	return objectRules{}
}
