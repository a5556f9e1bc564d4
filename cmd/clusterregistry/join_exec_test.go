package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// cloudPlugin writes an exec plugin, as a cloud's would be, that answers with the member's
// administrator certificate, and returns its path.
func cloudPlugin(t *testing.T, m *localfleet.Member) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(m.Kubeconfig)
	require.NoError(t, err)
	user := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	require.NotEmpty(t, user.ClientCertificateData, "the member's kubeconfig has no client certificate to hand out")
	answer, err := json.Marshal(map[string]any{
		"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
		"status": map[string]string{"clientCertificateData": string(user.ClientCertificateData), "clientKeyData": string(user.ClientKeyData)},
	})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "cloud-auth-plugin")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\ncat <<'EOF'\n"+string(answer)+"\nEOF\n"), 0o700))
	return path
}

// join --exec registers a cloud cluster's plugin, not a token: nothing is made on the member or
// stored in the registry but the Cluster, and kubectl reaches the member through the registry
// when, and only when, the reader allows the plugin.
func TestJoinExec(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver and etcd; run without -short")
	}
	lf := localfleet.StartForTest(t, localfleet.Options{Members: 1})
	ctx := t.Context()
	bin := commandBinary(t)
	plugin := cloudPlugin(t, lf.Members[0])
	kubeconfig := userKubeconfig(t, lf, map[string]*localfleet.Member{"cloud": lf.Members[0]})
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	cfg.AuthInfos["cloud"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: plugin, Args: []string{"get-token", "--cluster", "prod eu"},
		Env: []clientcmdapi.ExecEnvVar{{Name: "CLOUD_SECRET", Value: "s3cr3t-value"}}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))
	cli := commandLine(ctx, kubeconfig, "clouds")
	code, _, stderr := cli("install", "--create-namespace")
	require.Equal(t, 0, code, stderr)

	code, _, stderr = cli("join", "cloud", "--exec", "--cluster-role", "view")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--cluster-role and --exec conflict")
	code, _, stderr = cli("join", "registry", "--exec")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `context "registry": its user runs no exec plugin`)

	code, out, stderr := cli("join", "cloud", "--exec", "--labels", "provider=cloud")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "registry: Cluster clouds/cloud created, with exec provider "+plugin)
	require.Contains(t, out, "note: the plugin's environment (CLOUD_SECRET) was not copied")
	require.Contains(t, out, "--allow-exec "+plugin+" --send-to "+lf.Members[0].URL())
	c, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters("clouds").Get(ctx, "cloud", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []v1alpha1.AuthProviderConfig{{Name: "exec", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeExec},
		Config: map[string]string{"command": plugin, "apiVersion": "client.authentication.k8s.io/v1", "args": `["get-token","--cluster","prod eu"]`}}},
		c.Spec.AuthInfo.Providers)
	_, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets("clouds").Get(ctx, "cloud-token", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "join --exec stored a Secret: %v", err)
	_, err = kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().ServiceAccounts("kube-system").Get(ctx, "clusterregistry-cloud", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "join --exec made a service account: %v", err)

	// A reader who has not allowed the plugin gets no kubeconfig entry for it.
	code, _, stderr = cli("export", "--format", "kubeconfig", "--credential-command", bin)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not exported: cluster clouds/cloud")
	// One who has reaches the member with kubectl: the plugin's certificate, through credential.
	code, out, stderr = cli("export", "--format", "kubeconfig", "--credential-command", bin, "--allow-exec", plugin, "--send-to", lf.Members[0].URL())
	require.Equal(t, 0, code, stderr)
	exported := filepath.Join(t.TempDir(), "clouds.kubeconfig")
	require.NoError(t, os.WriteFile(exported, []byte(out), 0o600))
	stdout, stderr, err := kubectl(ctx, lf, exported, "--context", "cloud", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	require.NoError(t, err, stderr)
	require.NotEmpty(t, stdout)
}
