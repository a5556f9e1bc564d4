package main

import (
	"context"
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
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// cloudPlugin writes an exec plugin, as a cloud's would be, that answers with the member's
// administrator certificate, and returns its path. Each run appends its arguments to a file
// beside it, "runs".
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
	dir := t.TempDir()
	path := filepath.Join(dir, "cloud-auth-plugin")
	script := "#!/bin/sh\necho \"$*\" >> '" + filepath.Join(dir, "runs") + "'\ncat <<'EOF'\n" + string(answer) + "\nEOF\n"
	require.NoError(t, os.WriteFile(path, []byte(script), 0o700))
	return path
}

// pluginRuns is what cloudPlugin's runs recorded, a line each.
func pluginRuns(t *testing.T, plugin string) string {
	data, err := os.ReadFile(filepath.Join(filepath.Dir(plugin), "runs"))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(data)
}

// join --exec registers a cloud cluster's plugin, not a token: nothing is made on the member or
// stored in the registry but the Cluster, and kubectl reaches the member through the registry
// when, and only when, the reader allows the plugin.
func TestJoinExec(t *testing.T) {
	realservers.Required(t)
	lf := sharedSet(t) // an empty cluster set of the test's own, into which the user joins
	clouds := lf.Namespace
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
	cli := commandLine(ctx, kubeconfig, clouds)
	code, _, stderr := cli("install", "--create-namespace")
	require.Equal(t, 0, code, stderr)

	code, _, stderr = cli("join", "cloud", "--exec", "--cluster-role", "view")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "--cluster-role and --exec conflict")
	code, _, stderr = cli("join", "registry", "--exec")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `context "registry": its user runs no exec plugin`)
	s := &joinExec{lf: lf, clouds: clouds, ctx: ctx, bin: bin, plugin: plugin, cli: cli}
	s.joinWithExec(t)
	s.readers(t)
}

// joinExec is what the parts of TestJoinExec share, in order.
type joinExec struct {
	lf     *localfleet.Fleet
	clouds string
	ctx    context.Context
	bin    string
	plugin string
	cli    func(args ...string) (int, string, string)
}

// joinWithExec: join --exec registers the exec plugin's command and arguments, and stores no Secret
// and makes no service account.
func (s *joinExec) joinWithExec(t *testing.T) {
	lf, clouds, ctx, plugin, cli := s.lf, s.clouds, s.ctx, s.plugin, s.cli
	code, out, stderr := cli("join", "cloud", "--exec", "--labels", "provider=cloud")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Contains(t, out, "registry: Cluster "+clouds+"/cloud created, with exec provider "+plugin)
	require.Contains(t, out, "note: the plugin's environment (CLOUD_SECRET) was not copied")
	allow := "--allow-exec-args='" + plugin + ` get-token --cluster "prod eu"'`
	require.Contains(t, out, "note: readers run the plugin only if they allow it with these arguments and this server: "+allow+" --send-to="+lf.Members[0].URL())
	c, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(clouds).Get(ctx, "cloud", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, []v1alpha1.AuthProviderConfig{{Name: "exec", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeExec},
		Config: map[string]string{"command": plugin, "apiVersion": "client.authentication.k8s.io/v1", "args": `["get-token","--cluster","prod eu"]`}}},
		c.Spec.AuthInfo.Providers)
	_, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(clouds).Get(ctx, "cloud-token", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "join --exec stored a Secret: %v", err)
	require.Empty(t, joinAccounts(t, kubernetes.NewForConfigOrDie(lf.Members[0].Config), clouds), "join --exec made a service account")
}

// readers: a reader runs the plugin only with the arguments it allowed, which an editor of the
// Cluster cannot change.
func (s *joinExec) readers(t *testing.T) {
	lf, clouds, ctx, bin, plugin, cli := s.lf, s.clouds, s.ctx, s.bin, s.plugin, s.cli
	// A reader who has not allowed the plugin gets no kubeconfig entry for it.
	code, _, stderr := cli("export", "--format", "kubeconfig", "--credential-command", bin)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not exported: cluster "+clouds+"/cloud")
	// Nor does one who allowed the command alone: the Cluster gives it arguments.
	code, _, stderr = cli("export", "--format", "kubeconfig", "--credential-command", bin, "--allow-exec", plugin, "--send-to", lf.Members[0].URL())
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "not exported: cluster "+clouds+"/cloud")
	require.Contains(t, stderr, "the exec args neither equal the arguments that --allow-exec-args gives nor fit --allow-exec-args's pattern")
	joinRun := "get-token --cluster prod eu\n" // join itself checks that the plugin reaches the member
	require.Equal(t, joinRun, pluginRuns(t, plugin), "the plugin ran for a reader who did not allow its arguments")
	// One who allowed what join said reaches the member with kubectl: the plugin's certificate,
	// through credential. The flag, as a shell would pass it, is one argument.
	allowArg := "--allow-exec-args=" + plugin + ` get-token --cluster "prod eu"`
	code, out, stderr := cli("export", "--format", "kubeconfig", "--credential-command", bin, allowArg, "--send-to", lf.Members[0].URL())
	require.Equal(t, 0, code, stderr)
	exported := filepath.Join(t.TempDir(), "clouds.kubeconfig")
	require.NoError(t, os.WriteFile(exported, []byte(out), 0o600))
	stdout, stderr, err := kubectl(ctx, lf, exported, "--context", "cloud", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	require.NoError(t, err, stderr)
	require.NotEmpty(t, stdout)
	require.Equal(t, joinRun+joinRun, pluginRuns(t, plugin))

	// An editor of the Cluster now chooses the plugin's arguments: the reader's kubectl gets no
	// credential, and the plugin does not run with them.
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(clouds)
	c, err := clusters.Get(ctx, "cloud", metav1.GetOptions{})
	require.NoError(t, err)
	c.Spec.AuthInfo.Providers[0].Config["args"] = `["delete-everything","--yes"]`
	_, err = clusters.Update(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, stderr, err = kubectl(ctx, lf, exported, "--context", "cloud", "auth", "whoami")
	require.Error(t, err)
	require.Contains(t, stderr, "the exec args neither equal the arguments that --allow-exec-args gives nor fit --allow-exec-args's pattern")
	require.NotContains(t, pluginRuns(t, plugin), "delete-everything", "the plugin ran with the editor's arguments")

	t.Run("arguments that pass a credential", func(t *testing.T) { testExecArgsWithCredentials(t, lf) })
}

// A plugin whose arguments pass a credential (kubelogin's --oidc-client-secret) is not copied
// into the registry, where every reader of the cluster set would see it: join --exec and import
// --from-kubeconfig refuse it, naming the flag and never its value, or leave the argument out
// with --drop-credential-args.
// TestJoinExec runs it on its fleet.
func testExecArgsWithCredentials(t *testing.T, lf *localfleet.Fleet) {
	ctx := t.Context()
	plugin := cloudPlugin(t, lf.Members[0])
	const secret = "0idc-cl1ent-s3cret-value"
	kubeconfig := userKubeconfig(t, lf, map[string]*localfleet.Member{"oidc": lf.Members[0]})
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	cfg.AuthInfos["oidc"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: plugin, InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
		Args: []string{"oidc-login", "get-token", "--oidc-issuer-url=https://issuer.example.com", "--oidc-client-secret=" + secret, "--password", secret, "--token-cache-dir=/tmp/cache"},
	}}
	require.NoError(t, clientcmd.WriteToFile(*cfg, kubeconfig))
	cli := commandLine(ctx, kubeconfig, "oidc")
	code, _, stderr := cli("install", "--create-namespace")
	require.Equal(t, 0, code, stderr)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters("oidc")

	for _, refused := range []struct {
		args []string
		says string
	}{
		{[]string{"join", "oidc", "--exec"}, "--drop-credential-args"},
		{[]string{"import", "--from-kubeconfig", kubeconfig}, "not imported"},
	} {
		code, out, stderr := cli(refused.args...)
		require.Equal(t, 1, code, "%v: %s", refused.args, out)
		require.Contains(t, out+stderr, `context "oidc": the exec plugin's argument --oidc-client-secret passes a credential`)
		require.Contains(t, out+stderr, refused.says)
		require.NotContains(t, out+stderr, secret)
		_, err = clusters.Get(ctx, "oidc", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a refused %v made the Cluster: %v", refused.args, err)
	}

	wantArgs := `["oidc-login","get-token","--oidc-issuer-url=https://issuer.example.com","--token-cache-dir=/tmp/cache"]`
	for _, args := range [][]string{
		{"join", "oidc", "--exec", "--drop-credential-args"},
		{"import", "--from-kubeconfig", kubeconfig, "--drop-credential-args"},
	} {
		code, out, stderr := cli(args...)
		require.Equal(t, 0, code, "%v: %s%s", args, out, stderr)
		require.Contains(t, out, "argument --oidc-client-secret was left out")
		require.Contains(t, out, "argument --password and its value was left out")
		require.NotContains(t, out+stderr, secret)
		c, err := clusters.Get(ctx, "oidc", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, wantArgs, c.Spec.AuthInfo.Providers[0].Config["args"], "%v", args)
		stored, err := json.Marshal(c)
		require.NoError(t, err)
		require.NotContains(t, string(stored), secret, "%v copied the credential into the registry", args)
		require.NoError(t, clusters.Delete(ctx, "oidc", metav1.DeleteOptions{}))
	}
}
