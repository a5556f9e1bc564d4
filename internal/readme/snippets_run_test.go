package readme

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// librarySnippetsRun are the snippets of docs/library.md that run, not only compile: "Reach a
// member" (for each Cluster of the registry, whatever its provider type), then the fan-out with
// ForEach and Map, in that order, each as written. What they take as given (ctx, registryKube,
// registryClient, cluster, cm) is a real registry's.
var librarySnippetsRun = []string{
	"Secrets: access.SecretsFromClient(registryKube),  // read with your own permissions",
	"results := multicluster.ForEach(ctx, fleet.Members()",
	"versions := multicluster.Map(ctx, fleet.Members()",
}

// snippetRunner is the test that runs them: it reads the registry's kubeconfig from
// $SNIPPETS_KUBECONFIG, runs "Reach a member" for every Cluster, and keeps its resolver for the
// fan-out, as a reader of the page would.
const snippetRunner = `package snippets

import (
	"context"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/clientset/versioned"
)

func TestLibrarySnippets(t *testing.T) {
	var err error
	ctx = context.Background()
	if cfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("SNIPPETS_KUBECONFIG")); err != nil {
		t.Fatal(err)
	}
	registryKube, registryClient = kubernetes.NewForConfigOrDie(cfg), versioned.NewForConfigOrDie(cfg)
	cm = corev1ac.ConfigMap("library-snippet", "default").WithData(map[string]string{"from": "docs/library.md"})
	list, err := registryClient.ClusterregistryV1alpha1().Clusters("").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("no Clusters to reach: %v", err)
	}
	for i := range list.Items {
		cluster = &list.Items[i]
		if err := snippet1(); err != nil {
			t.Errorf("docs/library.md's first snippet on Cluster %s/%s (%s): %v", cluster.Namespace, cluster.Name, cluster.Spec.AuthInfo.Providers[0].Type.Name, err)
		}
	}
	if err := snippet2(); err != nil {
		t.Errorf("docs/library.md's ForEach: %v", err)
	}
	if err := snippet3(); err != nil {
		t.Errorf("docs/library.md's Map: %v", err)
	}
}
`

// runLibrarySnippets runs librarySnippetsRun against the registry kubeconfig reaches, in a
// package of their own inside the module (removed after), and returns what they printed.
func runLibrarySnippets(t *testing.T, kubeconfig string) string {
	t.Helper()
	var src strings.Builder
	for i, marker := range librarySnippetsRun {
		body := ""
		for _, s := range fences(t, "go") {
			if strings.Contains(s, marker) {
				body = s
			}
		}
		require.NotEmpty(t, body, "docs/library.md has no snippet with %q", marker)
		// "Reach a member" declares its resolver, and the fan-out its Fleet: what follows uses the
		// ones they made.
		body = strings.Replace(body, "resolver, err := access.NewResolver(", "resolver, err = access.NewResolver(", 1)
		body = strings.Replace(body, "fleet := multicluster.NewFleet(", "fleet = multicluster.NewFleet(", 1)
		src.WriteString("\nfunc snippet" + string(rune('1'+i)) + "() error {\n\tvar err error\n\t_ = err\n" + body + usedAll(body) + "\treturn err\n}\n")
	}
	file := usedImports(strings.Replace(snippetPrelude, "\tt              *testing.T\n", "", 1), src.String())
	dir, err := os.MkdirTemp(".", "_snippetsrun")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snippets.go"), []byte(file), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run_test.go"), []byte(snippetRunner), 0o600))
	cmd := exec.Command("go", "test", "-count=1", "-v", "./"+filepath.Base(dir))
	cmd.Env = append(os.Environ(), "SNIPPETS_KUBECONFIG="+kubeconfig)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Run(), "docs/library.md's snippets, run:\n%s\nthe file run:\n%s", out.String(), numbered(file))
	return out.String()
}

// declared is the left side of a declaration at a snippet's top level: names and commas.
var declared = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(, *[A-Za-z_][A-Za-z0-9_]*)*$`)

// usedAll uses every name a snippet declares at its top level: a snippet shows a value it does
// not go on to use, which a build refuses.
func usedAll(body string) string {
	var out strings.Builder
	for line := range strings.Lines(body) {
		lhs, _, ok := strings.Cut(line, " := ")
		if !ok || !declared.MatchString(lhs) {
			continue
		}
		for _, name := range strings.Split(lhs, ",") {
			if name = strings.TrimSpace(name); name != "_" && name != "err" {
				out.WriteString("\t_ = " + name + "\n")
			}
		}
	}
	return out.String()
}

// usedImports is prelude, with only the imports that it or body use, then body.
func usedImports(prelude, body string) string {
	head, rest, _ := strings.Cut(prelude, "import (\n")
	block, decls, _ := strings.Cut(rest, "\n)\n")
	var kept []string
	for _, line := range strings.Split(block, "\n") {
		spec := strings.Fields(line)
		if len(spec) == 0 {
			continue
		}
		name := strings.Trim(spec[0], `"`)
		if len(spec) == 1 {
			name = name[strings.LastIndex(name, "/")+1:]
		}
		if strings.Contains(decls+body, name+".") {
			kept = append(kept, line)
		}
	}
	return head + "import (\n" + strings.Join(kept, "\n") + "\n)\n" + decls + body
}
