package tunnel_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/gobuild"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// The command's tunnel-server and a reader's trust flags, as an operator runs them: clusterregistry
// health --once reaches the tunnelled member through a tunnel-server process, and finds it Ready.
func TestTheCommandsThroughTheTunnel(t *testing.T) {
	realservers.Required(t)
	bin := filepath.Join(gobuild.Commands(t, "..", "./cmd/clusterregistry"), "clusterregistry")
	dir := t.TempDir()
	readers, agents := testcerts.NewCA("tunnel-readers"), testcerts.NewCA("tunnel-agents")
	file := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	frontendCert, frontendKey := testcerts.PEM(readers.Serving("127.0.0.1"))
	readerCert, readerKey := testcerts.PEM(readers.Client("health", "system:masters"))
	agentCert, agentKey := testcerts.PEM(agents.Serving("127.0.0.1"))
	frontend, agentsAddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	ns := fleettest.NewSet(t, lf)
	server := exec.Command(bin, "tunnel-server", "--kubeconfig="+lf.Registry.Kubeconfig, "-n", ns, "-v",
		"--frontend-address="+frontend, "--agent-address="+agentsAddr,
		"--frontend-cert="+file("frontend.crt", frontendCert), "--frontend-key="+file("frontend.key", frontendKey),
		"--reader-ca="+file("readers-ca.crt", readers.PEM),
		"--agent-cert="+file("agents.crt", agentCert), "--agent-key="+file("agents.key", agentKey))
	start(t, "tunnel-server", server)

	// An operator at the edge, in the member's network with a way to the registry, joins the
	// member, writing the agent's manifests out, and runs the agent they describe.
	kubeconfig := contexts(t, map[string]string{"registry": lf.Registry.Kubeconfig, "edge": lf.Members[0].Kubeconfig})
	manifests := filepath.Join(dir, "agent.yaml")
	require.NoError(t, lf.Members[0].Bridge(registryAddress()))
	joined, err := atTheEdge(bin, "--kubeconfig="+kubeconfig, "--context=registry", "-n", ns, "join", "edge",
		"--tunnel="+agentsAddr, "--tunnel-agent-ca="+file("agents-ca.crt", agents.PEM),
		"--tunnel-destination="+memberAddress(t), "--tunnel-manifests="+manifests).CombinedOutput()
	require.NoError(t, err, "%s", joined)
	require.Contains(t, string(joined), "the tunnel agent's manifests are written out")
	deployment, secret := readManifests(t, manifests)
	(&rig{}).runDeployed(t, deployment, secret)
	trust := []string{"--tunnel-server=" + frontend, "--tunnel-ca=" + file("frontend-ca.crt", readers.PEM),
		"--tunnel-cert=" + file("reader.crt", readerCert), "--tunnel-key=" + file("reader.key", readerKey)}
	var out []byte
	require.Eventually(t, func() bool {
		var err error
		out, err = exec.Command(bin, append([]string{"--kubeconfig=" + lf.Registry.Kubeconfig, "-n", ns, "health", "--once"}, trust...)...).CombinedOutput()
		return err == nil && bytes.Contains(out, []byte("Reachable"))
	}, time.Minute, 200*time.Millisecond, "health --once through the tunnel")
	require.NotContains(t, string(out), string(readerKey), "the reader's key in the command's output")

	t.Run("kubectl reaches the member through tunnel-proxy and an exported kubeconfig", func(t *testing.T) {
		kubectlThroughTheProxy(t, bin, kubeconfig, ns, trust)
	})

	unjoined, err := atTheEdge(bin, "--kubeconfig="+kubeconfig, "--context=registry", "-n", ns, "unjoin", "edge", "--member-context=edge").CombinedOutput()
	require.NoError(t, err, "%s", unjoined)
	require.Contains(t, string(unjoined), "registry: ServiceAccount "+ns+"/edge-agent, the tunnel agent's (and its tokens) deleted")
}

// kubectlThroughTheProxy runs tunnel-proxy, exports the set's kubeconfig for it, and has the real
// kubectl list the member's namespaces with it; without --tunnel-proxy, export leaves the member
// out and says why.
func kubectlThroughTheProxy(t *testing.T, bin, kubeconfig, ns string, trust []string) {
	proxyAddr := "127.0.0.1:" + freePort(t)
	proxy := exec.Command(bin, append([]string{"--kubeconfig=" + lf.Registry.Kubeconfig, "tunnel-proxy", "--listen=" + proxyAddr}, trust...)...)
	start(t, "tunnel-proxy", proxy)
	export := append([]string{"--kubeconfig=" + kubeconfig, "--context=registry", "-n", ns, "export", "--format=kubeconfig"}, trust...)
	var stderr bytes.Buffer
	without := exec.Command(bin, export...)
	without.Stderr = &stderr
	_, err := without.Output()
	require.Error(t, err)
	require.Contains(t, stderr.String(), "give --tunnel-proxy")
	exported, err := exec.Command(bin, append(export, "--tunnel-proxy="+proxyAddr)...).Output()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "exported")
	require.NoError(t, os.WriteFile(path, exported, 0o600))
	assets, err := localfleet.AssetsDir("")
	require.NoError(t, err)
	var got []byte
	require.Eventually(t, func() bool {
		got, err = exec.Command(filepath.Join(assets, "kubectl"), "--kubeconfig="+path, "--context=edge", "get", "namespaces", "-o", "name").CombinedOutput()
		return err == nil && bytes.Contains(got, []byte("namespace/default"))
	}, time.Minute, 200*time.Millisecond, "kubectl through the tunnel proxy")
}

// contexts writes one kubeconfig with a context of each of the files, by the names given.
func contexts(t *testing.T, files map[string]string) string {
	t.Helper()
	merged := clientcmdapi.NewConfig()
	for name, path := range files {
		c, err := clientcmd.LoadFromFile(path)
		require.NoError(t, err)
		ctx := c.Contexts[c.CurrentContext]
		merged.Clusters[name], merged.AuthInfos[name] = c.Clusters[ctx.Cluster], c.AuthInfos[ctx.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*merged, path))
	return path
}

// readManifests reads the agent's Deployment and Secret from join's --tunnel-manifests.
func readManifests(t *testing.T, path string) (*appsv1.Deployment, *corev1.Secret) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var d appsv1.Deployment
	var s corev1.Secret
	for _, doc := range strings.Split(string(data), "---\n") {
		switch {
		case strings.Contains(doc, "kind: Deployment"):
			require.NoError(t, yaml.Unmarshal([]byte(doc), &d))
		case strings.Contains(doc, "kind: Secret"):
			require.NoError(t, yaml.Unmarshal([]byte(doc), &s))
		}
	}
	require.NotEmpty(t, d.Spec.Template.Spec.Containers, "no Deployment in the manifests")
	require.NotEmpty(t, s.Data[agent.TokenKey], "no token in the manifests' Secret")
	return &d, &s
}
