package readme

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/localfleet"
)

func TestMain(m *testing.M) {
	flag.Parse()
	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	os.Exit(m.Run())
}

// TestInstallStepsWorkOnAFreshRegistry runs README.md's "Install the CRD without Go" steps, as
// written, with real kubectl, on a registry with no CRD and no "fleet" namespace.
func TestInstallStepsWorkOnAFreshRegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver, etcd and kubectl; run without -short")
	}
	var steps string
	for _, block := range fences(t, "sh") {
		if strings.Contains(block, "kubectl apply -f clusterregistry/crd/") {
			steps = block
		}
	}
	require.NotEmpty(t, steps, "README.md has no kubectl steps that install the CRD")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lf, err := localfleet.Start(ctx, localfleet.Options{Bare: true}) // no CRD, no namespace
	require.NoError(t, err)
	defer lf.Stop()
	require.NotEmpty(t, lf.Kubectl)

	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	for line := range strings.Lines(steps) {
		command, _, _ := strings.Cut(line, "#")
		if command = strings.TrimSpace(command); command == "" {
			continue
		}
		// The CRD takes a moment to be served after it is created, and kubectl retries nothing.
		var out []byte
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			cmd := exec.CommandContext(ctx, "sh", "-c", command)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "KUBECONFIG="+lf.Registry.Kubeconfig, "PATH="+filepath.Dir(lf.Kubectl)+":"+os.Getenv("PATH"))
			if out, err = cmd.CombinedOutput(); err == nil {
				break
			}
			require.True(t, time.Now().Before(deadline), "README step %q: %v\n%s", command, err, out)
		}
		t.Logf("$ %s\n%s", command, out)
		if strings.HasPrefix(command, "kubectl get clusters") {
			require.Contains(t, string(out), "prod-eu-1", fmt.Sprintf("the sample Clusters are not listed:\n%s", out))
		}
	}
}
