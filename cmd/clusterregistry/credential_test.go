package main

import (
	"bytes"
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/execcredential"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/gobuild"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// commandBinary builds the command, for tests that need it as a program: kubectl runs it as a
// credential plugin, and health runs as a process of its own. The binary is shared with every
// test binary of this checkout (gobuild), and linked only when the sources changed.
func commandBinary(t *testing.T) string {
	t.Helper()
	return filepath.Join(gobuild.Commands(t, ".", "."), "clusterregistry")
}

// kubectl runs the fleet's kubectl with a kubeconfig and nothing of the environment's.
func kubectl(ctx context.Context, lf *localfleet.Fleet, kubeconfig string, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, lf.Kubectl, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "KUBECONFIG=") })
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// A user joins two clusters, exports the cluster set as a kubeconfig, and reaches every member
// with kubectl through the registry; the file holds no credential. Then an attacker tries every
// way from a kubeconfig or a Cluster to a member's credentials, and each is refused, saying why,
// without the credential in what is printed.
func TestKubeconfigThroughRegistry(t *testing.T) {
	realservers.Required(t)
	lf := sharedSet(t) // an empty cluster set of the test's own, into which the user joins
	ctx := t.Context()
	bin := commandBinary(t)
	kubeconfig := userKubeconfig(t, lf, map[string]*localfleet.Member{"alpha": lf.Members[0], "beta": lf.Members[1]})
	joined := lf.Namespace
	cli := commandLine(ctx, kubeconfig, joined)
	code, _, stderr := cli("install", "--create-namespace")
	require.Equal(t, 0, code, stderr)
	for _, name := range []string{"alpha", "beta"} {
		code, out, stderr := cli("join", name)
		require.Equal(t, 0, code, "%s%s", out, stderr)
	}
	registryKube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	var tokens []string
	for _, name := range []string{"alpha", "beta"} {
		s, err := registryKube.CoreV1().Secrets(joined).Get(ctx, name+"-token", metav1.GetOptions{})
		require.NoError(t, err)
		tokens = append(tokens, string(s.Data["token"]))
	}
	noToken := func(what, text string) {
		t.Helper()
		requireNoToken(t, tokens, what, text)
	}

	code, out, stderr := cli("export", "--format", "kubeconfig", "--credential-command", bin)
	require.Equal(t, 0, code, stderr)
	noToken("the exported kubeconfig", out)
	exported := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	require.NoError(t, os.WriteFile(exported, []byte(out), 0o600))
	for i, name := range []string{"alpha", "beta"} {
		stdout, stderr, err := kubectl(ctx, lf, exported, "--context", name, "get", "ns", "kube-system", "-o", "jsonpath={.metadata.uid}")
		require.NoError(t, err, "kubectl through the registry to %s: %s", name, stderr)
		ns, err := kubernetes.NewForConfigOrDie(lf.Members[i].Config).CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, string(ns.UID), stdout, "kubectl --context %s reached another cluster", name)
	}

	// A server that records whatever credentials reach it.
	evil, evilCA, received := recordingServer(t)

	base, err := clientcmd.LoadFromFile(exported)
	require.NoError(t, err)
	alphaServer := base.Clusters["alpha"].Server
	bobPath := registryUserKubeconfig(t, lf, "bob") // no role in the registry

	for _, tc := range kubeconfigAttacks(evil.URL, evilCA, alphaServer, bobPath, joined, lf.Registry.URL()) {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := kubectl(ctx, lf, kubeconfigVariant(t, base, tc.edit), "--context", "alpha", "get", "ns")
			require.Error(t, err)
			require.Contains(t, stderr, tc.refusal)
			noToken("kubectl's error", stderr)
		})
	}
	require.Empty(t, received(), "a member's credentials reached the attacker's server")

	// The Cluster's editor points alpha at the attacker: the Secret is pinned to alpha's server,
	// so the credential is not resolved, and the old kubeconfig gets nothing either.
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(joined)
	c, err := clusters.Get(ctx, "alpha", metav1.GetOptions{})
	require.NoError(t, err)
	c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = evil.URL
	c.Spec.KubernetesAPIEndpoints.CABundle = evilCA
	_, err = clusters.Update(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, stderr, err = kubectl(ctx, lf, exported, "--context", "alpha", "get", "ns")
	require.Error(t, err)
	require.Contains(t, stderr, "Secret "+joined+"/alpha-token pins its credentials to "+alphaServer+", not to "+evil.URL)
	noToken("kubectl's error", stderr)
	code, _, stderr = cli("export", "--format", "kubeconfig", "--credential-command", bin)
	require.Equal(t, 1, code, "export of a Cluster whose Secret is pinned elsewhere")
	require.Contains(t, stderr, "not exported: cluster "+joined+"/alpha")
	require.Contains(t, stderr, "1 of 2 Clusters not exported, named above")
	require.Empty(t, received(), "a member's credentials reached the attacker's server")

	requireAccessEnds(t, lf, cli, exported)
}

// requireNoToken: text holds none of tokens.
func requireNoToken(t *testing.T, tokens []string, what, text string) {
	t.Helper()
	for _, token := range tokens {
		require.NotContains(t, text, token, "%s holds a member's token", what)
	}
}

// requireAccessEnds: once unjoined, the Cluster is gone, and so is access through it; and the
// credential command refuses to run other than by kubectl.
func requireAccessEnds(t *testing.T, lf *localfleet.Fleet, cli func(args ...string) (int, string, string), exported string) {
	t.Helper()
	// Unjoined: the Cluster is gone, and so is access through it.
	code, _, stderr := cli("unjoin", "beta")
	require.Equal(t, 0, code, stderr)
	_, stderr, err := kubectl(t.Context(), lf, exported, "--context", "beta", "get", "ns")
	require.Error(t, err)
	require.Contains(t, stderr, "cluster "+lf.Namespace+"/beta is not in the registry")

	// Not run by kubectl.
	t.Setenv(execcredential.InfoEnv, "")
	code, _, stderr = cli("credential", "alpha")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "KUBERNETES_EXEC_INFO is not set")
}

// recordingServer is a server that records the credentials that reach it, and refuses them: its
// CA, and what it received so far.
func recordingServer(t *testing.T) (*httptest.Server, []byte, func() []string) {
	var mu sync.Mutex
	var received []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received = append(received, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "{}", http.StatusUnauthorized)
	}))
	t.Cleanup(srv.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return srv, ca, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(received)
	}
}

// kubeconfigVariant writes base, as edit changes it, to a file of its own.
func kubeconfigVariant(t *testing.T, base *clientcmdapi.Config, edit func(c *clientcmdapi.Config)) string {
	c := base.DeepCopy()
	edit(c)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*c, path))
	return path
}

// registryUserKubeconfig writes a kubeconfig of a new user of the registry, its one context named
// "registry".
func registryUserKubeconfig(t *testing.T, lf *localfleet.Fleet, user string) string {
	kubeconfig, err := lf.Registry.AddUser(user)
	require.NoError(t, err)
	cfg, err := clientcmd.Load(kubeconfig)
	require.NoError(t, err)
	cfg.Contexts = map[string]*clientcmdapi.Context{"registry": cfg.Contexts[cfg.CurrentContext]}
	path := filepath.Join(t.TempDir(), user)
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// kubeconfigAttack is an edit of an exported kubeconfig, and how credential refuses it.
type kubeconfigAttack struct {
	name    string
	edit    func(c *clientcmdapi.Config)
	refusal string
}

// kubeconfigAttacks are the edits of an exported kubeconfig that credential refuses: evilURL is
// the attacker's server, alphaServer alpha's own, bobPath a kubeconfig of a user who may not read
// the Cluster.
func kubeconfigAttacks(evilURL string, evilCA []byte, alphaServer, bobPath, joined, registryURL string) []kubeconfigAttack {
	return []kubeconfigAttack{
		{"a kubeconfig that sends alpha's credentials to another server", func(c *clientcmdapi.Config) {
			c.Clusters["alpha"].Server, c.Clusters["alpha"].CertificateAuthorityData = evilURL, evilCA
		}, "refused: the credentials are for " + alphaServer + ", but the client is about to call " + evilURL},
		{"a kubeconfig that trusts another CA for alpha's server", func(c *clientcmdapi.Config) {
			c.Clusters["alpha"].CertificateAuthorityData = evilCA
		}, "refused: the client would verify " + alphaServer + " with another certificate authority"},
		{"a kubeconfig that does not verify alpha's server", func(c *clientcmdapi.Config) {
			c.Clusters["alpha"].CertificateAuthorityData, c.Clusters["alpha"].InsecureSkipTLSVerify = nil, true
		}, "refused: the kubeconfig skips verifying " + alphaServer},
		{"a kubeconfig that hides the server from the plugin", func(c *clientcmdapi.Config) {
			c.AuthInfos["alpha"].Exec.ProvideClusterInfo = false
		}, "set provideClusterInfo: true"},
		{"a user who may not read the Cluster", func(c *clientcmdapi.Config) {
			args := c.AuthInfos["alpha"].Exec.Args
			for i := range args {
				if strings.HasPrefix(args[i], "--kubeconfig=") {
					args[i] = "--kubeconfig=" + bobPath
				}
			}
		}, "cluster " + joined + "/alpha: the registry (" + registryURL + ") does not let you read it; ask for the clusterregistry-view role (or view) in namespace " + joined},
	}
}
