package tunnel_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/gobuild"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
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
	readerCert, readerKey := testcerts.PEM(readers.Client("health"))
	agentCert, agentKey := testcerts.PEM(agents.Serving("127.0.0.1"))
	frontend, agentsAddr := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
	server := exec.Command(bin, "tunnel-server", "--kubeconfig="+lf.Registry.Kubeconfig, "-v",
		"--frontend-address="+frontend, "--agent-address="+agentsAddr,
		"--frontend-cert="+file("frontend.crt", frontendCert), "--frontend-key="+file("frontend.key", frontendKey),
		"--reader-ca="+file("readers-ca.crt", readers.PEM),
		"--agent-cert="+file("agents.crt", agentCert), "--agent-key="+file("agents.key", agentKey))
	var serverOut bytes.Buffer
	server.Stdout, server.Stderr = &serverOut, &serverOut
	require.NoError(t, server.Start())
	t.Cleanup(func() {
		_ = server.Process.Kill()
		_ = server.Wait()
		if t.Failed() {
			t.Logf("tunnel-server:\n%s", tail(serverOut.String(), 3000))
		}
	})

	ns := fleettest.CopySet(t, lf, "member-1")
	r := &rig{agents: agentsAddr, agentCAFile: file("agents-ca.crt", agents.PEM), dir: dir}
	r.startAgent(t, r.agentAccount(t, ns, "member-1-agent", memberAddress(t)), access.TunnelHost(ns, "member-1-agent"))
	tunnelled(t, ns, "member-1-agent")

	var out []byte
	require.Eventually(t, func() bool {
		var err error
		out, err = exec.Command(bin, "--kubeconfig="+lf.Registry.Kubeconfig, "-n", ns, "health", "--once",
			"--tunnel-server="+frontend, "--tunnel-ca="+file("frontend-ca.crt", readers.PEM),
			"--tunnel-cert="+file("reader.crt", readerCert), "--tunnel-key="+file("reader.key", readerKey)).CombinedOutput()
		return err == nil && bytes.Contains(out, []byte("Reachable"))
	}, time.Minute, 200*time.Millisecond, "health --once through the tunnel")
	require.NotContains(t, string(out), string(readerKey), "the reader's key in the command's output")
}
