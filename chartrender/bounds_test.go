package chartrender_test

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cluster-registry/sdk/chartrender"
)

// hostile is a chart of one ConfigMap whose data is what template makes.
func hostile(t *testing.T, template string) *chartrender.Chart {
	t.Helper()
	c, err := chartrender.Load(packaged(t, "hostile", map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: hostile\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  x: |\n" + template + "\n",
	}))
	require.NoError(t, err)
	return c
}

// A chart's templates are its writer's code running in the controller: what a function would
// make is checked before it is made, a render that takes too long is given up on and stops at
// its next function call, and a render that makes too much in all is refused. Each says which
// bound, and is kept, so that the same input is not rendered again.
func TestTemplatesAreBounded(t *testing.T) {
	defer goleak.VerifyNone(t)
	// The size bounds are met within a minute even under -race; the time bound in 300 ms.
	sized := chartrender.NewRenderer(chartrender.Options{Timeout: time.Minute, MaxBytes: 1 << 20})
	timed := chartrender.NewRenderer(chartrender.Options{Timeout: 300 * time.Millisecond, MaxBytes: 1 << 20})
	for template, want := range map[string]string{
		`{{ until 100000000 }}`:                                             "function until would make 762 MiB, over 1 MiB",
		`{{ untilStep 0 100000000 1 }}`:                                     "function untilStep would make 762 MiB, over 1 MiB",
		`{{ seq 1 2 1000000000 }}`:                                          "function seq would make 3814 MiB, over 1 MiB",
		`{{ repeat 100000000 "ab" }}`:                                       "function repeat would make 190 MiB, over 1 MiB",
		`{{ "a\nb" | nindent 1000000 }}`:                                    "function nindent would make 2 MiB, over 1 MiB",
		`{{ randAlphaNum 100000000 }}`:                                      "function randAlphaNum would make 95 MiB, over 1 MiB",
		`{{ range until 20000 }}{{ repeat 4 "0123456789abcdef" }}{{ end }}`: "made 1 MiB of files, over 1 MiB",
		// Ten billion calls of add: stopped at the call after the time is up.
		`{{ range $i := until 100000 }}{{ range $j := until 100000 }}{{ if eq (add $i $j) -1 }}x{{ end }}{{ end }}{{ end }}`: "took longer than 300ms",
	} {
		t.Run(want, func(t *testing.T) {
			r := sized
			if strings.HasPrefix(want, "took longer") {
				r = timed
			}
			in := chartrender.Input{Chart: hostile(t, template), ReleaseName: "h", Namespace: "apps"}
			before := r.Renders()
			_, err := r.Render(in)
			var limit *chartrender.LimitError
			require.True(t, errors.As(err, &limit), "%v", err)
			require.Equal(t, "hostile", limit.Chart)
			require.Equal(t, want, limit.Limit)
			require.EqualError(t, err, "chart hostile: rendering "+want+": a chart's templates run in the controller, bounded in time and size (chartrender.Options)")
			_, again := r.Render(in)
			require.Equal(t, err, again, "the same input renders again")
			require.Equal(t, before+1, r.Renders())
		})
	}
	// Under the bounds, the same functions serve as Helm's do (TestParityWithHelmTemplate has
	// the rest).
	objs, err := sized.Render(chartrender.Input{Chart: hostile(t, `    {{ until 3 }} {{ repeat 2 "ab" }} {{ seq 3 }} {{ "a" | nindent 2 | trim }} {{ randAlpha 4 | len }}`), ReleaseName: "h", Namespace: "apps"})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"x": "[0 1 2] abab 1 2 3 a 4\n"}, objs[0].Object["data"])
}

// helmOwn must hold every template function that Helm's engine defines or removes over sprig's,
// or the bounded sprig function would replace Helm's: this reads Helm's engine as go.mod has it.
func TestHelmOwnIsHelms(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "helm.sh/helm/v4").Output()
	require.NoError(t, err)
	dir := filepath.Join(strings.TrimSpace(string(out)), "pkg", "engine")
	var helms []string
	fset := token.NewFileSet()
	for _, file := range []string{"funcs.go", "engine.go"} {
		f, err := parser.ParseFile(fset, filepath.Join(dir, file), nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				// funcMap and initFunMap are where Helm's engine makes its function map.
				return n.Name.Name == "funcMap" || n.Name.Name == "initFunMap"
			case *ast.KeyValueExpr: // "toYaml": toYAML,
				if s, ok := n.Key.(*ast.BasicLit); ok && s.Kind == token.STRING {
					helms = append(helms, unquote(t, s.Value))
				}
			case *ast.IndexExpr: // funcMap["include"] = ...
				if s, ok := n.Index.(*ast.BasicLit); ok && s.Kind == token.STRING {
					helms = append(helms, unquote(t, s.Value))
				}
			case *ast.CallExpr: // delete(f, "env")
				if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "delete" && len(n.Args) == 2 {
					if s, ok := n.Args[1].(*ast.BasicLit); ok {
						helms = append(helms, unquote(t, s.Value))
					}
				}
			}
			return true
		})
	}
	require.Greater(t, len(helms), 20, "found too few of Helm's functions to trust the reading")
	slices.Sort(helms)
	require.Equal(t, slices.Compact(helms), chartrender.HelmOwnForTest())
}

func unquote(t *testing.T, s string) string {
	t.Helper()
	u, err := strconv.Unquote(s)
	require.NoError(t, err)
	return u
}
