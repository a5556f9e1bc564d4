package placement

import (
	"fmt"

	"github.com/google/cel-go/cel"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// celCostLimit bounds one evaluation, as the API server bounds a CRD's validation rules: a
// policy's author cannot make every replica's scheduler spin on a pathological expression.
const celCostLimit = 100_000

// program is a compiled CEL expression over a Cluster.
type program struct {
	prg cel.Program
}

func compileCEL(expr string) (*program, error) {
	env, err := cel.NewEnv(cel.Variable("cluster", cel.MapType(cel.StringType, cel.DynType)), cel.OptionalTypes())
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	if t := ast.OutputType(); t != cel.BoolType && t != cel.DynType { // dyn: a field of cluster, checked when evaluated
		return nil, fmt.Errorf("the expression is %s, want bool", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(celCostLimit))
	if err != nil {
		return nil, err
	}
	return &program{prg: prg}, nil
}

// eval is the expression's value for c; an error (a missing key, the cost limit) is a reason
// to leave c out, and says why.
func (p *program) eval(c *v1alpha1.Cluster) (bool, error) {
	ready := map[string]any{"status": "Unknown", "reason": v1alpha1.ReasonNotProbed}
	if cond := c.Status.Condition(v1alpha1.ConditionReady); cond != nil {
		ready = map[string]any{"status": string(cond.Status), "reason": cond.Reason}
	}
	cluster := map[string]any{
		"name": c.Name, "namespace": c.Namespace,
		"labels": stringMap(c.Labels), "annotations": stringMap(c.Annotations),
		"version": c.Status.Version, "ready": ready,
	}
	out, _, err := p.prg.Eval(map[string]any{"cluster": cluster})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %v, not a bool", out.Value())
	}
	return b, nil
}

func stringMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// ClusterExpression is a compiled CEL expression over a Cluster, as a Placement's cel field takes
// it: the same variables (`cluster`, with `name`, `namespace`, `labels`, `annotations`, `version`
// and `ready`) and the same bound on each evaluation's cost. Other choices of Clusters that should
// read as a Placement's use it (a Release's overrides do).
type ClusterExpression struct{ p *program }

// CompileClusterExpression compiles expr, which must be a bool.
func CompileClusterExpression(expr string) (*ClusterExpression, error) {
	p, err := compileCEL(expr)
	if err != nil {
		return nil, err
	}
	return &ClusterExpression{p: p}, nil
}

// Matches is expr's value for c; an error (a missing key, the cost limit) says why there is none.
func (e *ClusterExpression) Matches(c *v1alpha1.Cluster) (bool, error) { return e.p.eval(c) }
