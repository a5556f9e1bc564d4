package readme

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/gobuild"
)

// registerSteps is README.md's walk-through that joins kind-dev.
func registerSteps(t *testing.T) string {
	t.Helper()
	var steps string
	for _, block := range fences(t, "sh") {
		if strings.Contains(block, "join kind-dev") {
			steps = block
		}
	}
	require.NotEmpty(t, steps, "README.md has no walk-through that joins kind-dev")
	return steps
}

// TestRegisterStepsWork runs README.md's "Register your clusters" walk-through as written, with
// the commands built from this checkout and real kubectl: a kubeconfig with contexts kind-ops (a
// plain API server, which becomes the registry), kind-dev and kind-prod (two members).
func TestRegisterStepsWork(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver, etcd and kubectl; run without -short")
	}
	steps := registerSteps(t)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The members' Clusters go to a namespace of their own, so that "fleet" starts empty.
	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 2, Namespace: "localfleet"})
	require.NoError(t, err)
	defer lf.Stop()
	require.NotEmpty(t, lf.Kubectl)

	dir := t.TempDir()
	kubeconfig := clientcmdapi.NewConfig()
	for name, path := range map[string]string{"kind-ops": lf.Registry.Kubeconfig, "kind-dev": lf.Members[0].Kubeconfig, "kind-prod": lf.Members[1].Kubeconfig} {
		cfg, err := clientcmd.LoadFromFile(path)
		require.NoError(t, err)
		c := cfg.Contexts[cfg.CurrentContext]
		kubeconfig.Clusters[name], kubeconfig.AuthInfos[name] = cfg.Clusters[c.Cluster], cfg.AuthInfos[c.AuthInfo]
		kubeconfig.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kubeconfig.CurrentContext = "kind-dev"
	kubeconfigPath := filepath.Join(dir, "config")
	require.NoError(t, clientcmd.WriteToFile(*kubeconfig, kubeconfigPath))

	// go install, from this checkout.
	bin := gobuild.Commands(t, "../..", "./cmd/clusterregistry", "./examples/fanout-deploy")

	for line := range strings.Lines(steps) {
		command, _, _ := strings.Cut(line, "#")
		if command = strings.TrimSpace(command); command == "" || strings.HasPrefix(command, "go install") {
			continue
		}
		env := append(os.Environ(), "KUBECONFIG="+kubeconfigPath, "PATH="+bin+":"+filepath.Dir(lf.Kubectl)+":"+os.Getenv("PATH"))
		if background, ok := strings.CutSuffix(command, "&"); ok {
			// A step the reader leaves running: it runs until the walk-through ends.
			var logs bytes.Buffer
			cmd := exec.CommandContext(ctx, "sh", "-c", "exec "+strings.TrimSpace(background))
			cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &logs, &logs
			require.NoError(t, cmd.Start(), "README step %q", command)
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGINT)
				require.NoError(t, cmd.Wait(), "README step %q, after an interrupt:\n%s", command, logs.String())
			}()
			continue
		}
		cmd := exec.CommandContext(ctx, "sh", "-c", command)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "README step %q:\n%s", command, out)
		t.Logf("$ %s\n%s", command, out)
		switch {
		case strings.HasPrefix(command, "kubectl --context kind-ops get clusters"):
			require.Regexp(t, `(?m)^dev\s+.*\sTrue\s+v1\.`, string(out), "the health controller has not filled READY and VERSION")
			require.Regexp(t, `(?m)^prod\s+.*\sTrue\s+v1\.`, string(out))
		case strings.HasPrefix(command, "clusterregistry --context kind-ops get"):
			require.Regexp(t, `(?m)^dev\s+True\s+Reachable\s+v1\.`, string(out))
		case strings.HasPrefix(command, "fanout-deploy"):
			require.Contains(t, string(out), "fleet/dev")
			require.Contains(t, string(out), "fleet/prod")
		case strings.HasPrefix(command, "kubectl --kubeconfig fleet.kubeconfig"):
			require.Contains(t, string(out), "hello", "kubectl through the registry does not show the fan-out's Deployment")
		}
	}
	// docs/library.md's first snippets, on the same registry: every Cluster reached (the
	// walk-through's and localfleet's, kubeconfig-secret among them), then the fan-out to
	// env=prod's member, which then holds its ConfigMap.
	out := runLibrarySnippets(t, lf.Registry.Kubeconfig)
	t.Logf("docs/library.md's snippets, run:\n%s", out)
	require.Regexp(t, `fleet/prod runs v1\.`, out, "docs/library.md's Map")
	_, err = kubernetes.NewForConfigOrDie(lf.Members[1].Config).CoreV1().ConfigMaps("default").Get(ctx, "library-snippet", metav1.GetOptions{})
	require.NoError(t, err, "docs/library.md's ForEach did not apply its ConfigMap to prod")
}
