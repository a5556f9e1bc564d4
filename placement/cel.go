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

// compileCEL compiles expr, whose type must be one of want (dyn, a field of cluster, is
// checked when evaluated).
func compileCEL(expr string, want ...*cel.Type) (*program, error) {
	env, err := cel.NewEnv(cel.Variable("cluster", cel.MapType(cel.StringType, cel.DynType)), cel.OptionalTypes())
	if err != nil {
		return nil, err
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	ok := ast.OutputType() == cel.DynType
	for _, t := range want {
		ok = ok || ast.OutputType() == t
	}
	if !ok {
		return nil, fmt.Errorf("the expression is %s, want %s", ast.OutputType(), want[0])
	}
	prg, err := env.Program(ast, cel.CostLimit(celCostLimit))
	if err != nil {
		return nil, err
	}
	return &program{prg: prg}, nil
}

// compileBool compiles a bool expression: a filter.
func compileBool(expr string) (*program, error) { return compileCEL(expr, cel.BoolType) }

// compileNumber compiles a number expression: a preference's score.
func compileNumber(expr string) (*program, error) {
	return compileCEL(expr, cel.DoubleType, cel.IntType, cel.UintType)
}

// eval is the bool expression's value for vars (clusterVars); an error (a missing key, the cost
// limit) is a reason to leave the Cluster out, and says why.
func (p *program) eval(vars map[string]any) (bool, error) {
	out, _, err := p.prg.Eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, fmt.Errorf("the expression gave %v, not a bool", out.Value())
	}
	return b, nil
}

// number is the number expression's value for vars.
func (p *program) number(vars map[string]any) (float64, error) {
	out, _, err := p.prg.Eval(vars)
	if err != nil {
		return 0, err
	}
	switch v := out.Value().(type) {
	case float64:
		return v, nil
	case int64:
		return float64(v), nil
	case uint64:
		return float64(v), nil
	}
	return 0, fmt.Errorf("the expression gave %v, not a number", out.Value())
}

// clusterVars is what an expression sees of c: `cluster`, with its resources when figures is
// not nil (those fresh enough for the policy).
func clusterVars(c *v1alpha1.Cluster, figures *v1alpha1.ClusterResources) map[string]any {
	ready := map[string]any{"status": "Unknown", "reason": v1alpha1.ReasonNotProbed}
	if cond := c.Status.Condition(v1alpha1.ConditionReady); cond != nil {
		ready = map[string]any{"status": string(cond.Status), "reason": cond.Reason}
	}
	properties := make(map[string]string, len(c.Status.Properties))
	for _, p := range c.Status.Properties {
		properties[p.Name] = p.Value
	}
	cluster := map[string]any{
		"name": c.Name, "namespace": c.Namespace,
		"labels": stringMap(c.Labels), "annotations": stringMap(c.Annotations),
		"version": c.Status.Version, "ready": ready, "properties": properties,
	}
	if figures != nil {
		cluster["resources"] = resourceVars(figures)
	}
	return map[string]any{"cluster": cluster}
}

func stringMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// ClusterExpression is a compiled CEL expression over a Cluster, as a Placement's cel field takes
// it: the same variables (`cluster`, with `name`, `namespace`, `labels`, `annotations`, `version`,
// `ready`, `properties` and, whenever status has them, whatever their age, `resources`) and the
// same bound on each evaluation's cost. Other choices of Clusters that should read as a
// Placement's use it (a Release's overrides do).
type ClusterExpression struct{ p *program }

// CompileClusterExpression compiles expr, which must be a bool.
func CompileClusterExpression(expr string) (*ClusterExpression, error) {
	p, err := compileBool(expr)
	if err != nil {
		return nil, err
	}
	return &ClusterExpression{p: p}, nil
}

// Matches is expr's value for c; an error (a missing key, the cost limit) says why there is none.
func (e *ClusterExpression) Matches(c *v1alpha1.Cluster) (bool, error) {
	return e.p.eval(clusterVars(c, c.Status.Resources))
}
