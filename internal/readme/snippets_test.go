package readme

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fences are the code blocks of the given language in README.md and the pages of docs/ it links,
// in that order.
func fences(t *testing.T, lang string) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	var blocks []string
	re := regexp.MustCompile("(?ms)^```" + lang + "\n(.*?)^```")
	for _, page := range append([]string{"../../README.md"}, pages...) {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range re.FindAllStringSubmatch(string(text), -1) {
			blocks = append(blocks, m[1])
		}
	}
	return blocks
}

// snippetPrelude declares what README's snippets take as given: the packages they use and the
// variables a tool would already have.
const snippetPrelude = `package snippets

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	cpaccess "sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	mcbuilder "sigs.k8s.io/multicluster-runtime/pkg/builder"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	mcreconcile "sigs.k8s.io/multicluster-runtime/pkg/reconcile"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/clusterregistry"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/mcprovider"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/placement"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/scheduler"
)

var (
	ctx            context.Context
	cfg            *rest.Config
	memberConfig   *rest.Config // an administrator's config of a member
	caPEM          []byte
	registryKube   kubernetes.Interface
	registryClient versioned.Interface
	secretLister   corelisters.SecretLister
	cluster        *v1alpha1.Cluster
	resolver       *access.Resolver // from "Reach a member"
	fleet          *multicluster.Fleet // from "Act on many members"
	cm             *corev1ac.ConfigMapApplyConfiguration
	t              *testing.T
	runMyTool      func(t *testing.T, args ...string)
	reconciler     mcreconcile.Func
	profiles       cpversioned.Interface
	clusters       []*v1alpha1.Cluster // candidates, from a lister or a Fleet
	last           placement.Decision  // the previous decision
	work           func(context.Context, *multicluster.Member) (string, error)
	policy         *placement.Compiled
)
`

// TestGoSnippetsCompile builds every Go snippet of README.md, as written, in a function of its
// own. Only "declared and not used" is forgiven: a snippet shows a value it does not go on to use.
func TestGoSnippetsCompile(t *testing.T) {
	snippets := fences(t, "go")
	require.NotEmpty(t, snippets)
	var src strings.Builder
	imports := map[string]bool{}
	for _, line := range strings.Split(snippetPrelude, "\n") {
		imports[strings.TrimSpace(line)] = true
	}
	var extraImports []string
	for i, s := range snippets {
		// A snippet may open with its imports; they join the file's.
		if rest, ok := strings.CutPrefix(s, "import (\n"); ok {
			block, body, _ := strings.Cut(rest, "\n)\n")
			for _, line := range strings.Split(block, "\n") {
				if line = strings.TrimSpace(line); line != "" && !imports[line] {
					extraImports = append(extraImports, line)
					imports[line] = true // two snippets may import one package
				}
			}
			s = body
		}
		fmt.Fprintf(&src, "\n// README.md, Go snippet %d\nfunc _() error {\n\tvar err error\n\t_ = err\n%s\treturn nil\n}\n", i+1, s)
	}
	file := strings.Replace(snippetPrelude, "import (\n", "import (\n\t"+strings.Join(extraImports, "\n\t")+"\n", 1) + src.String()

	// Inside the module, so that the SDK's own packages resolve; the directory is removed after.
	dir, err := os.MkdirTemp(".", "_snippets")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snippets.go"), []byte(file), 0o600))
	cmd := exec.Command("go", "build", "-gcflags=-e", "-o", os.DevNull, "./"+filepath.Base(dir))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	var problems []string
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "#") || strings.Contains(line, "declared and not used") || strings.Contains(line, "imported and not used") {
			continue
		}
		problems = append(problems, line)
	}
	if len(problems) > 0 || (cmd.ProcessState.ExitCode() != 0 && len(problems) == 0 && !strings.Contains(out.String(), "not used")) {
		t.Errorf("README.md's Go snippets do not compile:\n%s\nthe file built:\n%s", strings.Join(problems, ""), numbered(file))
	}
}

func numbered(s string) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%4d  %s\n", i+1, line)
	}
	return b.String()
}
