package consumer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// tool is a small multi-cluster tool: it reads the registry with the generated clientset and
// fans out with access and multicluster, the things tools import.
const tool = `package main

import (
	"context"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/multicluster"
)

func main() {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		panic(err)
	}
	list, err := versioned.NewForConfigOrDie(cfg).ClusterregistryV1alpha1().Clusters("fleet").List(ctx, metav1.ListOptions{})
	if err != nil {
		panic(err)
	}
	resolver, err := access.NewResolver(access.ResolverOptions{})
	if err != nil {
		panic(err)
	}
	members := multicluster.MembersOf(resolver, list.Items, multicluster.FleetOptions{})
	results := multicluster.Map(ctx, members, func(ctx context.Context, m *multicluster.Member) (string, error) {
		return m.Name().String(), nil
	}, multicluster.Concurrency(8))
	fmt.Println(results.Err())
}
`

// What a tool must not get by depending on the SDK's core packages: test frameworks, code
// generators, and the ecosystem's modules that only the packages speaking their APIs import.
var notForTools = []string{
	"sigs.k8s.io/controller-runtime/pkg/envtest",
	"go.uber.org/goleak",
	"github.com/stretchr/testify",
	"k8s.io/code-generator",
	"sigs.k8s.io/controller-tools",
	"github.com/cluster-registry/sdk/localfleet",
	// The module's test support. (Internal packages that the core packages use, such as
	// internal/answercap, are part of what a tool builds.)
	"github.com/cluster-registry/sdk/testkit",
	"github.com/cluster-registry/sdk/testkit/fleettest",
	"github.com/cluster-registry/sdk/testkit/simmembers",
	"github.com/cluster-registry/sdk/testkit/testcerts",
	"github.com/cluster-registry/sdk/internal/readme",
	"github.com/cluster-registry/sdk/testkit/consumer",
	// The ecosystem's modules are for the packages that speak their APIs (mcprovider).
	"sigs.k8s.io/multicluster-runtime",
	"sigs.k8s.io/cluster-inventory-api",
}

func TestAToolVendorsTheSDK(t *testing.T) {
	if testing.Short() {
		t.Skip("resolves and vendors the SDK's dependencies; run without -short")
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/optikon\n\ngo 1.26.0\n\n"+
		"require github.com/cluster-registry/sdk v0.0.0\n\nreplace github.com/cluster-registry/sdk => "+root+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(tool), 0o600))

	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
	}
	goCmd("mod", "tidy")
	goCmd("mod", "vendor")
	// -trimpath keeps the build cache keyed by import path, not by this temporary directory.
	build := exec.Command("go", "build", "-mod=vendor", "-trimpath", "-o", filepath.Join(dir, "optikon"), ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "GOFLAGS=", "GOWORK=off", "GOPROXY=off") // vendored: nothing is fetched
	out, err := build.CombinedOutput()
	require.NoError(t, err, "the vendored build:\n%s", out)

	modules, err := os.ReadFile(filepath.Join(dir, "vendor", "modules.txt"))
	require.NoError(t, err)
	var packages []string
	for line := range strings.Lines(string(modules)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			packages = append(packages, line)
		}
	}
	require.Contains(t, packages, "github.com/cluster-registry/sdk/multicluster")
	for _, p := range packages {
		for _, bad := range notForTools {
			require.False(t, p == bad || strings.HasPrefix(p, bad+"/"), "a tool that vendors the SDK gets %s", p)
		}
	}
	t.Logf("the tool vendors %d packages", len(packages))
}
