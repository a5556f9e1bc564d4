package access

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// Each built-in provider type, end to end: a Cluster in the registry points at credentials, the
// Resolver follows the pointer, and the result reaches the member's /version and lists ConfigMaps.
func TestBuiltinProvidersReachTheMember(t *testing.T) {
	realservers.Required(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	token := memberToken(t, memberNS, "reader")
	dir := t.TempDir()

	// A client certificate the member trusts, and a kubeconfig with it.
	kubeconfig, err := member.AddUser("cert-user", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	kcfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var certData, keyData []byte
	for _, a := range kcfg.AuthInfos {
		certData, keyData = a.ClientCertificateData, a.ClientKeyData
	}
	kubeconfigPath := filepath.Join(dir, "member.kubeconfig")
	tokenPath := filepath.Join(dir, "token")
	for path, data := range map[string][]byte{kubeconfigPath: kubeconfig, tokenPath: []byte(token + "\n")} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	putSecret(t, ns, "sa-token", pinnedTo(member.URL()), map[string][]byte{"token": []byte(token)})
	putSecret(t, ns, "client-cert", pinnedTo(member.URL()), map[string][]byte{"tls.crt": certData, "tls.key": keyData})
	// Cluster API's convention: <cluster>-kubeconfig, key "value"; the kubeconfig's server pins it.
	putSecret(t, ns, "by-kubeconfig-kubeconfig", nil, map[string][]byte{"value": kubeconfig})

	plugin := buildExecPlugin(t)
	for _, tc := range []struct {
		cluster  string
		provider v1alpha1.AuthProviderConfig
	}{
		{"by-token", provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "sa-token"})},
		{"by-cert", provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "client-cert"})},
		{"by-kubeconfig", provider("p", v1alpha1.ProviderTypeKubeconfigSecret, nil)},
		{"by-file", provider("p", v1alpha1.ProviderTypeKubeconfigFile, map[string]string{"path": kubeconfigPath})},
		{"by-token-file", provider("p", v1alpha1.ProviderTypeTokenFile, map[string]string{"path": tokenPath})},
		{"by-exec", provider("p", v1alpha1.ProviderTypeExec, map[string]string{
			"command": plugin,
			"env":     "TEST_TOKEN_FILE=" + tokenPath + " TEST_COUNT_FILE=" + filepath.Join(dir, "count"),
		})},
	} {
		t.Run(tc.provider.Type.Name+"/"+tc.cluster, func(t *testing.T) {
			c := memberCluster(t, ns, tc.cluster, tc.provider)
			r := newResolver(t, ResolverOptions{
				FileRoots: []FileRoot{{Dir: dir, SendTo: Servers(member.URL())}},
				ExecPlugins: []ExecPlugin{{Command: plugin, ClusterEnv: []string{"TEST_TOKEN_FILE", "TEST_COUNT_FILE"},
					SendTo: Servers(member.URL())}},
			})
			a, err := r.Resolve(testContext(t), c)
			if err != nil {
				t.Fatal(err)
			}
			if a.ProviderType != tc.provider.Type.Name || a.Server.String() != member.URL() {
				t.Errorf("resolved to %s via %s", a.Server, a.ProviderType)
			}
			if err := useMember(testContext(t), a); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// buildExecPlugin compiles testdata/execplugin into a temporary directory.
func buildExecPlugin(t testing.TB) string {
	t.Helper()
	return buildTestCommand(t, "execplugin")
}

// buildTestCommand compiles testdata/<name> into a temporary directory.
func buildTestCommand(t testing.TB, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, "./testdata/"+name)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building testdata/%s: %v\n%s", name, err, b)
	}
	return out
}

// The exec plugin's credential is used until it expires, without running the plugin again, and
// the plugin is given the member's server when the Cluster asks for it.
func TestExecPluginHonoursExpiry(t *testing.T) {
	realservers.Required(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	dir := t.TempDir()
	tokenPath, countPath, infoPath := filepath.Join(dir, "token"), filepath.Join(dir, "count"), filepath.Join(dir, "info")
	if err := os.WriteFile(tokenPath, []byte(memberToken(t, memberNS, "exec-user")), 0o600); err != nil {
		t.Fatal(err)
	}
	plugin := buildExecPlugin(t)
	const lifetime = 3 * time.Second
	c := memberCluster(t, ns, "exec", provider("cloud", v1alpha1.ProviderTypeExec, map[string]string{
		"command":            plugin,
		"args":               `["get-token", "--cluster", "exec"]`,
		"env":                `{"TEST_TOKEN_FILE":"` + tokenPath + `","TEST_COUNT_FILE":"` + countPath + `","TEST_INFO_FILE":"` + infoPath + `","TEST_EXPIRY_SECONDS":"3"}`,
		"provideClusterInfo": "true",
	}))
	r := newResolver(t, ResolverOptions{
		ExecPlugins: []ExecPlugin{{
			Command:     plugin,
			ClusterArgs: true,
			ClusterEnv:  []string{"TEST_TOKEN_FILE", "TEST_COUNT_FILE", "TEST_INFO_FILE", "TEST_EXPIRY_SECONDS"},
			SendTo:      Servers(member.URL()),
		}},
	})
	runs := func() int {
		b, _ := os.ReadFile(countPath)
		return strings.Count(string(b), "ran")
	}

	start := time.Now()
	for range 3 {
		a, err := r.Resolve(testContext(t), c)
		if err != nil {
			t.Fatal(err)
		}
		if err := useMember(testContext(t), a); err != nil {
			t.Fatal(err)
		}
	}
	if n := runs(); n != 1 && time.Since(start) < lifetime {
		t.Errorf("plugin ran %d times while its credential was valid, want 1", n)
	}
	if info, _ := os.ReadFile(infoPath); string(info) != member.URL() {
		t.Errorf("plugin was given server %q, want %q", info, member.URL())
	}

	time.Sleep(time.Until(start.Add(lifetime + time.Second)))
	a, err := r.Resolve(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := useMember(testContext(t), a); err != nil {
		t.Fatal(err)
	}
	if n := runs(); n < 2 {
		t.Errorf("plugin ran %d times; its credential expired, so it should have run again", n)
	}
	if args := a.Config.ExecProvider.Args; strings.Join(args, " ") != "get-token --cluster exec" {
		t.Errorf("exec args %q", args)
	}
	if a.Config.ExecProvider.InteractiveMode != clientcmdapi.NeverExecInteractiveMode {
		t.Errorf("exec interactive mode %q, want Never", a.Config.ExecProvider.InteractiveMode)
	}
}
