package clusterprofile_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpaccess "sigs.k8s.io/cluster-inventory-api/pkg/access"

	// The secretreader plugin, which the interop test builds, is made of this package.
	_ "sigs.k8s.io/cluster-inventory-api/pkg/credentialplugin"

	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// cluster-inventory-api's own access code reaches a member from the profile we published: its
// provider file maps our access provider to its secretreader plugin, which reads the consumer's
// own token for the cluster the profile's exec extension names.
func TestInventoryToolingReachesPublishedMember(t *testing.T) {
	fleetmain.Integration(t)
	m := lf.Members[0]
	ns := fleettest.CopySet(t, lf)
	startPublisher(t, ns, nil)
	published := profile(t, ns, m.Name, func(p *cpv1alpha1.ClusterProfile) bool { return len(p.Status.AccessProviders) == 1 })

	// The consumer's own credential, where secretreader looks: Secret <its namespace>/<clusterName>.
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	token, err := kube.CoreV1().Secrets(ns).Get(context.Background(), m.Name+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().Secrets(metav1.NamespaceDefault).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name}, Data: map[string][]byte{"token": token.Data["token"]}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.CoreV1().Secrets(metav1.NamespaceDefault).Delete(context.Background(), m.Name, metav1.DeleteOptions{})
	})

	dir := t.TempDir()
	plugin := filepath.Join(dir, "secretreader")
	build := exec.Command("go", "build", "-o", plugin, "sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building cluster-inventory-api's secretreader plugin:\n%s", out)
	providers, err := json.Marshal(map[string]any{"providers": []map[string]any{{
		"name": clusterprofile.DefaultAccessProvider,
		"execConfig": map[string]any{
			"apiVersion":         "client.authentication.k8s.io/v1",
			"command":            plugin,
			"provideClusterInfo": true,
			"env":                []map[string]string{{"name": "KUBECONFIG", "value": lf.Registry.Kubeconfig}},
		},
	}}})
	require.NoError(t, err)
	providerFile := filepath.Join(dir, "clusterprofile-provider-file.json")
	require.NoError(t, os.WriteFile(providerFile, providers, 0o600))

	config, err := cpaccess.NewFromFile(providerFile)
	require.NoError(t, err)
	restConfig, err := config.BuildConfigFromCP(published)
	require.NoError(t, err)
	version, err := kubernetes.NewForConfigOrDie(restConfig).Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, m.Version, version.GitVersion)
	// An authenticated request, not only /version: the plugin's token reached the member.
	_, err = kubernetes.NewForConfigOrDie(restConfig).CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	require.NoError(t, err)
}
