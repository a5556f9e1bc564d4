package clusterregistry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// lastRelease is the release and commit recorded in hack/last-release, and that commit's tree,
// extracted from git.
func lastRelease(t *testing.T) (version, dir string) {
	t.Helper()
	data, err := os.ReadFile("../hack/last-release")
	require.NoError(t, err)
	fields := strings.Fields(string(data))
	require.Len(t, fields, 2, "hack/last-release: want \"vX.Y.Z <commit>\"")
	dir = t.TempDir()
	archive := exec.Command("sh", "-c", "git archive "+fields[1]+" | tar -x -C "+dir)
	archive.Dir = ".."
	out, err := archive.CombinedOutput()
	require.NoError(t, err, "extracting %s (%s): %s", fields[0], fields[1], out)
	return fields[0], dir
}

// A registry set up by the last release (its own clusterregistry install, its samples applied
// with kubectl) is upgraded by this release's Install: every object stays readable, valid and
// unchanged, and reapplying it changes nothing. The last release's install, run again over this
// release's CRD, leaves it alone.
func TestUpgradeFromLastRelease(t *testing.T) {
	version, old := lastRelease(t)
	// Building the old command compiles the whole SDK and its dependencies on a cold machine,
	// beside the other packages' tests: it gets its own, generous, deadline.
	buildCtx, cancelBuild := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancelBuild()
	oldCommand := filepath.Join(t.TempDir(), "clusterregistry")
	build := exec.CommandContext(buildCtx, "go", "build", "-trimpath", "-o", oldCommand, "./cmd/clusterregistry")
	build.Dir = old
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building %s's clusterregistry: %s", version, out)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	fleet, err := localfleet.Start(ctx, localfleet.Options{Bare: true})
	require.NoError(t, err)
	defer fleet.Stop()
	run := func(program string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, program, append([]string{"--kubeconfig", fleet.Registry.Kubeconfig}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "%s %v: %s", filepath.Base(program), args, stderr.String())
		return stdout.String()
	}
	t.Logf("%s install:\n%s", version, run(oldCommand, "install", "--create-namespace", "-n", "fleet"))
	// The CRD takes a moment to be served to kubectl's discovery after it is established.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		cmd := exec.CommandContext(ctx, fleet.Kubectl, "--kubeconfig", fleet.Registry.Kubeconfig, "apply", "-n", "fleet", "-f", filepath.Join(old, "examples", "clusters"))
		if out, err := cmd.CombinedOutput(); err == nil {
			break
		} else {
			require.True(t, time.Now().Before(deadline), "applying %s's samples: %s", version, out)
		}
	}

	clusters := versioned.NewForConfigOrDie(fleet.Registry.Config).ClusterregistryV1alpha1().Clusters("fleet")
	before, err := clusters.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, before.Items)

	ext := apiextensionsclient.NewForConfigOrDie(fleet.Registry.Config)
	result, err := clusterregistry.Install(ctx, ext)
	require.NoError(t, err)
	t.Logf("this release's Install over %s's CRD: %s", version, result)
	after, err := clusters.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, after.Items, len(before.Items))
	for i := range before.Items {
		b, a := before.Items[i], after.Items[i]
		require.Equal(t, b.ResourceVersion, a.ResourceVersion, "cluster %s was rewritten by the upgrade", a.Name)
		wantJSON, _ := json.Marshal(b.Spec)
		gotJSON, _ := json.Marshal(a.Spec)
		require.JSONEq(t, string(wantJSON), string(gotJSON), "cluster %s reads differently after the upgrade", a.Name)
		require.Empty(t, v1alpha1.ValidateCluster(&a), "cluster %s, written under %s, is not valid under this release", a.Name, version)
		// Still valid to the server: an update that changes nothing is accepted.
		_, err := clusters.Update(ctx, &a, metav1.UpdateOptions{})
		require.NoError(t, err, "the upgraded CRD refuses cluster %s as written under %s", a.Name, version)
	}

	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
	require.NoError(t, err)
	t.Logf("%s install over this release's CRD:\n%s", version, run(oldCommand, "install"))
	again, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, clusterregistry.CRDName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, crd.ResourceVersion, again.ResourceVersion, "%s's install changed this release's CRD", version)
	require.Equal(t, crd.Annotations[clusterregistry.SchemaVersionAnnotation], again.Annotations[clusterregistry.SchemaVersionAnnotation])
}
