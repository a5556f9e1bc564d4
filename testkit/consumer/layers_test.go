package consumer

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/cluster-registry/sdk"

// goPackage is what go list says of one package of the module.
type goPackage struct {
	ImportPath string
	Imports    []string // of its non-test files: what a build of it pulls in
}

// modulePackages lists every package of the module.
func modulePackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	cmd.Dir = "../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []goPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}

// under reports whether path is the module's package dir or one below it.
func under(path, dir string) bool {
	p := module + "/" + dir
	return path == p || strings.HasPrefix(path, p+"/")
}

// underGenerated reports whether path is the API's types or code generated from them: the bottom of
// the graph, below internal/.
func underGenerated(path string) bool {
	for _, dir := range []string{"clusterregistry/v1alpha1", "clientset", "informers", "listers", "applyconfiguration"} {
		if under(path, dir) {
			return true
		}
	}
	return false
}

// The package graph runs one way: the library's code never imports the test kit (hack/'s tools
// may), internal/ holds
// only what the library runs (and so imports nothing of the module above it), and the examples,
// which users copy out of the module, import nothing internal.
func TestPackagesImportOnlyDownwards(t *testing.T) {
	for _, p := range modulePackages(t) {
		for _, imp := range p.Imports {
			if !under(imp, "") && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			switch {
			case under(imp, "testkit") && !under(p.ImportPath, "testkit") && !under(p.ImportPath, "hack"):
				// hack/ is the project's own tooling (the demo among it), which no user imports
				// and the library never runs: the demo's tunnel takes testkit's throwaway CA.
				t.Errorf("%s imports the test kit %s outside its tests: what the library runs must not", p.ImportPath, imp)
			case under(p.ImportPath, "internal") && !under(imp, "internal") && !underGenerated(imp):
				t.Errorf("%s, under internal/, imports %s: internal/ is what the library runs, below its public packages; "+
					"code that needs the public packages belongs beside them (test support in testkit/)", p.ImportPath, imp)
			case under(p.ImportPath, "examples") && (under(imp, "internal") || under(imp, "testkit")):
				t.Errorf("example %s imports %s: a user who copies the example out of the module could not build it", p.ImportPath, imp)
			}
		}
	}
}

// controllerPackages are the SDK's controllers (and join, which makes what they keep): each is
// its own concern, and none imports another; what two share lives in a package below them
// (boundtoken, access, multicluster), and package controllers, which hosts them all, is above.
var controllerPackages = []string{"health", "rotation", "clusterprofile", "scheduler", "join", "delivery"}

// No controller imports another: join took the bound-token protocol from rotation, and a change
// to the rotator was a change to join.
func TestControllersDoNotImportEachOther(t *testing.T) {
	for _, p := range modulePackages(t) {
		var from string
		for _, c := range controllerPackages {
			if under(p.ImportPath, c) {
				from = c
			}
		}
		if from == "" {
			continue
		}
		for _, imp := range p.Imports {
			for _, c := range controllerPackages {
				if c != from && under(imp, c) {
					t.Errorf("%s imports %s: the controllers do not import each other; move what they share below them", p.ImportPath, imp)
				}
			}
		}
	}
}
