package access

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

const testServer = "https://member.example.com:6443"

func resolveErr(t *testing.T, opts ResolverOptions, c *v1alpha1.Cluster) error {
	t.Helper()
	_, err := newResolver(t, opts).Resolve(testContext(t), c)
	return err
}

func TestSecretNamespacePolicy(t *testing.T) {
	secrets := &memSecrets{}
	secrets.put(tokenSecret("shared-creds", "creds", "tok", pinnedTo(testServer)))
	c := offlineCluster("ns-policy", testServer, nil,
		provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "creds", "namespace": "shared-creds"}))

	err := resolveErr(t, ResolverOptions{Secrets: secrets}, c)
	if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "ResolverOptions.SecretNamespaces") {
		t.Errorf("Secret in another namespace: %v", err)
	}
	if secrets.reads != 0 {
		t.Error("the Secret was read although its namespace is not allowed")
	}
	for _, allowed := range [][]string{{"shared-creds"}, {"*"}} {
		if err := resolveErr(t, ResolverOptions{Secrets: secrets, SecretNamespaces: allowed}, c); err != nil {
			t.Errorf("SecretNamespaces %v: %v", allowed, err)
		}
	}
	noGetter, err := NewResolver(ResolverOptions{ClientIP: testClientIP})
	if err != nil {
		t.Fatal(err)
	}
	own := offlineCluster("ns-policy", testServer, nil, provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "creds"}))
	if _, err := noGetter.Resolve(testContext(t), own); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "ResolverOptions.Secrets") {
		t.Errorf("without a SecretGetter: %v", err)
	}
}

// The one exec policy: a command runs only if an ExecPlugin lists it, with the args it allows,
// the variables it lets Clusters set, and for the servers its SendTo allows. Refusals name the
// option to set and never a value of the Cluster's.
func TestExecPolicy(t *testing.T) {
	realservers.Required(t)
	const command = "/usr/bin/evil"
	c := offlineCluster("exec-policy", testServer, nil,
		provider("p", v1alpha1.ProviderTypeExec, map[string]string{"command": command, "args": "--fetch", "env": "LD_PRELOAD=/tmp/x.so"}))
	allowed := func(p ExecPlugin) ResolverOptions {
		p.Command = command
		return ResolverOptions{ExecPlugins: []ExecPlugin{p}}
	}
	for _, tc := range []struct {
		name  string
		opts  ResolverOptions
		check func(error) bool
		says  string
	}{
		{"not listed", ResolverOptions{}, isNotAllowed, "not among ResolverOptions.ExecPlugins"},
		{"listed for no server", allowed(ExecPlugin{ClusterArgs: true, ClusterEnv: []string{"LD_PRELOAD"}}), isPinning,
			"ResolverOptions.ExecPlugins[0].SendTo does not allow sending these credentials of the caller's to " + testServer},
		{"listed for another server", allowed(ExecPlugin{ClusterArgs: true, ClusterEnv: []string{"LD_PRELOAD"}, SendTo: Servers("https://other.example.com")}), isPinning,
			"ResolverOptions.ExecPlugins[0].SendTo"},
		{"args not allowed", allowed(ExecPlugin{Args: []string{"--get"}, SendTo: AnyServer()}), isNotAllowed,
			"neither equal ResolverOptions.ExecPlugins[0].Args nor fit ResolverOptions.ExecPlugins[0].ArgsPattern"},
		{"a wildcard admits no flag", allowed(ExecPlugin{ArgsPattern: []string{"*"}, ClusterEnv: []string{"LD_PRELOAD"}, SendTo: AnyServer()}), isNotAllowed,
			"nor fit ResolverOptions.ExecPlugins[0].ArgsPattern"},
		{"args outside the pattern", allowed(ExecPlugin{ArgsPattern: []string{"--fetch=*"}, ClusterEnv: []string{"LD_PRELOAD"}, SendTo: AnyServer()}), isNotAllowed,
			"nor fit ResolverOptions.ExecPlugins[0].ArgsPattern"},
		{"args within the pattern", allowed(ExecPlugin{ArgsPattern: []string{"--fetch"}, ClusterEnv: []string{"LD_PRELOAD"}, SendTo: AnyServer()}), nil, ""},
		{"env not allowed", allowed(ExecPlugin{ClusterArgs: true, SendTo: Servers(testServer)}), isNotAllowed,
			"exec env variable 1 is not in ResolverOptions.ExecPlugins[0].ClusterEnv"},
		{"allowed", allowed(ExecPlugin{ClusterArgs: true, ClusterEnv: []string{"LD_PRELOAD"}, SendTo: Servers("member.example.com:6443")}), nil, ""},
	} {
		err := resolveErr(t, tc.opts, c)
		if tc.check == nil {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		if !tc.check(err) || !strings.Contains(fmt.Sprint(err), tc.says) {
			t.Errorf("%s: got %v; want it to say %q", tc.name, err, tc.says)
		}
		for _, value := range []string{command, "--fetch", "LD_PRELOAD", "/tmp/x.so"} {
			if strings.Contains(err.Error(), value) {
				t.Errorf("%s: the error repeats the Cluster's %q: %v", tc.name, value, err)
			}
		}
	}
}

func isNotAllowed(err error) bool { return errors.Is(err, ErrNotAllowed) }

// A pattern lets a Cluster fill in values, never add, drop or replace a flag.
func TestMatchArgs(t *testing.T) {
	pattern := []string{"eks", "get-token", "--cluster-name", "*", "--region=*", "--output", "json"}
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"eks", "get-token", "--cluster-name", "prod", "--region=eu-west-1", "--output", "json"}, true},
		{[]string{"eks", "get-token", "--cluster-name", "prod", "--region=", "--output", "json"}, true},
		{[]string{"eks", "get-token", "--cluster-name", "--profile=attacker", "--region=eu", "--output", "json"}, false},
		{[]string{"eks", "get-token", "--cluster-name", "", "--region=eu", "--output", "json"}, false},
		{[]string{"eks", "get-token", "--cluster-name", "prod", "--regionx=eu", "--output", "json"}, false},
		{[]string{"eks", "get-token", "--cluster-name", "prod", "--region", "--output", "json"}, false},
		{[]string{"eks", "get-token", "--cluster-name", "prod", "--region=eu", "--output", "json", "--debug"}, false},
		{[]string{"eks", "get-token", "--cluster-name", "prod", "--region=eu", "--output"}, false},
		{[]string{"s3", "rm", "--recursive", "s3://bucket", "--region=eu", "--output", "json"}, false},
	} {
		if got := MatchArgs(pattern, tc.args); got != tc.want {
			t.Errorf("MatchArgs(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
	if !MatchArgs(nil, nil) || MatchArgs(nil, []string{"x"}) {
		t.Error("an empty pattern matches no args, and only that")
	}
	_, err := NewResolver(ResolverOptions{ExecPlugins: []ExecPlugin{{Command: "x", ClusterArgs: true, ArgsPattern: []string{"*"}}}})
	if err == nil || !strings.Contains(err.Error(), "ResolverOptions.ExecPlugins[0]: ClusterArgs") {
		t.Errorf("ClusterArgs with an ArgsPattern it would not honour: %v", err)
	}
}

func isPinning(err error) bool {
	var pe *PinningError
	return errors.As(err, &pe) && errors.Is(err, ErrUnpinnedSecret) && pe.Option != ""
}

// The caller's entries for one command can differ by args and servers; the caller's args and env
// are the defaults a Cluster need not carry, and the caller's env wins over the Cluster's.
func TestExecPluginEntries(t *testing.T) {
	realservers.Required(t)
	r := newResolver(t, ResolverOptions{ExecPlugins: []ExecPlugin{
		{Command: "cloud-login", Args: []string{"token", "--account", "prod"}, Env: map[string]string{"PROFILE": "prod"},
			ClusterEnv: []string{"PROFILE", "REGION"}, InstallHint: "install cloud-login", SendTo: Servers("https://prod.example.com")},
		{Command: "cloud-login", Args: []string{"token", "--account", "dev"}, SendTo: Servers("https://dev.example.com")},
	}})
	for _, tc := range []struct {
		server string
		config map[string]string
		args   []string
		env    string
	}{
		{"https://prod.example.com", map[string]string{"command": "cloud-login", "env": "PROFILE=mine REGION=eu"}, []string{"token", "--account", "prod"}, "REGION=eu PROFILE=prod"},
		{"https://dev.example.com", map[string]string{"command": "cloud-login"}, []string{"token", "--account", "dev"}, ""},
		{"https://dev.example.com", map[string]string{"command": "cloud-login", "args": "token --account dev"}, []string{"token", "--account", "dev"}, ""},
	} {
		c := offlineCluster("entries", tc.server, nil, provider("p", v1alpha1.ProviderTypeExec, tc.config))
		a, err := r.Resolve(testContext(t), c)
		if err != nil {
			t.Errorf("%s %v: %v", tc.server, tc.config, err)
			continue
		}
		exec := a.Config.ExecProvider
		var env []string
		for _, e := range exec.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		if !reflect.DeepEqual(exec.Args, tc.args) || strings.Join(env, " ") != tc.env {
			t.Errorf("%s: args %q env %q; want %q and %q", tc.server, exec.Args, env, tc.args, tc.env)
		}
		if exec.PluginPolicy.PolicyType != clientcmdapi.PluginPolicyAllowlist || exec.InteractiveMode != clientcmdapi.NeverExecInteractiveMode {
			t.Errorf("%s: plugin policy %v, interactive mode %s", tc.server, exec.PluginPolicy, exec.InteractiveMode)
		}
	}
	// The dev entry's args on the prod server: no entry fits both.
	c := offlineCluster("mixed", "https://prod.example.com", nil, provider("p", v1alpha1.ProviderTypeExec,
		map[string]string{"command": "cloud-login", "args": "token --account dev"}))
	if _, err := r.Resolve(testContext(t), c); !isPinning(err) {
		t.Errorf("dev args on the prod server: %v", err)
	}
}

func TestFileRootsPolicy(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	for path, content := range map[string]string{
		filepath.Join(root, "token"):     "inside",
		filepath.Join(outside, "secret"): "outside",
	} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	opts := ResolverOptions{FileRoots: []FileRoot{{Dir: root, SendTo: Servers(testServer)}}}
	for path, wantOK := range map[string]bool{
		filepath.Join(root, "token"):                                true,
		filepath.Join(root, "..", filepath.Base(outside), "secret"): false,
		filepath.Join(outside, "secret"):                            false,
		filepath.Join(root, "escape"):                               false, // a link out of the root
		"relative/token":                                            false,
	} {
		c := offlineCluster("files", testServer, nil, provider("p", v1alpha1.ProviderTypeTokenFile, map[string]string{"path": path}))
		err := resolveErr(t, opts, c)
		if wantOK != (err == nil) {
			t.Errorf("token file %s: %v", path, err)
		}
		if err != nil && (strings.Contains(err.Error(), "outside") || strings.Contains(err.Error(), path)) {
			t.Errorf("error quotes the file or its path: %v", err)
		}
	}
	c := offlineCluster("files", testServer, nil, provider("p", v1alpha1.ProviderTypeTokenFile, map[string]string{"path": filepath.Join(root, "token")}))
	if err := resolveErr(t, ResolverOptions{}, c); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("no FileRoots at all: %v", err)
	}
	// A root that sends nowhere serves kubeconfig files only; one that sends elsewhere, not here.
	for _, sendTo := range []ServerMatcher{nil, Servers("https://other.example.com")} {
		opts := ResolverOptions{FileRoots: []FileRoot{{Dir: root, SendTo: sendTo}}}
		if err := resolveErr(t, opts, c); !isPinning(err) || !strings.Contains(err.Error(), "ResolverOptions.FileRoots[0].SendTo") {
			t.Errorf("FileRoot.SendTo %v: %v", sendTo, err)
		}
	}
	if _, err := NewResolver(ResolverOptions{FileRoots: []FileRoot{{Dir: root, SendTo: Servers("ftp://x")}}}); err == nil ||
		!strings.Contains(err.Error(), "ResolverOptions.FileRoots[0].SendTo") {
		t.Errorf("a malformed SendTo server: %v", err)
	}
}

// A kubeconfig file gives its credentials for one server; a Cluster naming another is refused.
func TestKubeconfigFileIsPinnedToItsServer(t *testing.T) {
	realservers.Required(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://member.example.com:6443"}}]
users: [{name: u, user: {token: file-token}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := ResolverOptions{FileRoots: []FileRoot{{Dir: dir}}} // the kubeconfig's own server pins it
	same := offlineCluster("same", "member.example.com:6443", nil, provider("p", v1alpha1.ProviderTypeKubeconfigFile, map[string]string{"path": path}))
	if err := resolveErr(t, opts, same); err != nil {
		t.Errorf("the kubeconfig's own server, spelled differently: %v", err)
	}
	other := offlineCluster("other", "https://attacker.example.com", nil, provider("p", v1alpha1.ProviderTypeKubeconfigFile, map[string]string{"path": path}))
	var pinErr *PinningError
	if err := resolveErr(t, opts, other); !errors.As(err, &pinErr) || pinErr.File != path || strings.Contains(err.Error(), "file-token") {
		t.Errorf("another server: %v", err)
	}
	missing := offlineCluster("missing", testServer, nil, provider("p", v1alpha1.ProviderTypeKubeconfigFile, map[string]string{"path": path, "context": "nope"}))
	if err := resolveErr(t, opts, missing); err == nil || !strings.Contains(err.Error(), "has no such context") || strings.Contains(err.Error(), "nope") {
		t.Errorf("missing context: %v", err)
	}
}

// The caller's preference of types picks among a Cluster's providers; when none resolves, the
// error says what each one lacked.
func TestPreferenceOrder(t *testing.T) {
	realservers.Required(t)
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte("file-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := &memSecrets{}
	secrets.put(tokenSecret("fleet", "creds", "secret-token", pinnedTo(testServer)))
	c := offlineCluster("prefs", testServer, nil,
		provider("laptop", v1alpha1.ProviderTypeExec, map[string]string{"command": "login"}),
		provider("controller", v1alpha1.ProviderTypeSecret, map[string]string{"name": "creds"}),
		provider("projected", v1alpha1.ProviderTypeTokenFile, map[string]string{"path": tokenPath}),
	)
	base := ResolverOptions{Secrets: secrets, FileRoots: []FileRoot{{Dir: dir, SendTo: AnyServer()}},
		ExecPlugins: []ExecPlugin{{Command: "login", SendTo: AnyServer()}}}
	for _, tc := range []struct {
		prefer []string
		want   string
	}{
		{nil, "laptop"}, // the Cluster's own order
		{[]string{v1alpha1.ProviderTypeTokenFile, v1alpha1.ProviderTypeSecret}, "projected"},
		{[]string{v1alpha1.ProviderTypeSecret, v1alpha1.ProviderTypeTokenFile}, "controller"},
		{[]string{v1alpha1.ProviderTypeKubeconfigFile, v1alpha1.ProviderTypeSecret}, "controller"}, // none of the first type
	} {
		opts := base
		opts.Prefer = tc.prefer
		a, err := newResolver(t, opts).Resolve(testContext(t), c)
		if err != nil || a.Provider != tc.want {
			t.Errorf("Prefer %v: got %v, %v; want %s", tc.prefer, a, err, tc.want)
		}
	}

	// The first preferred provider fails; the next is used.
	opts := base
	opts.ExecPlugins = nil
	if a, err := newResolver(t, opts).Resolve(testContext(t), c); err != nil || a.Provider != "controller" {
		t.Errorf("exec not allowed, falls through to the secret: %v, %v", a, err)
	}

	opts.Prefer = []string{v1alpha1.ProviderTypeExec}
	_, err := newResolver(t, opts).Resolve(testContext(t), c)
	var none *NoProviderError
	var clusterErr *ClusterError
	if !errors.As(err, &none) || !errors.As(err, &clusterErr) || !errors.Is(err, ErrNoUsableProvider) || !errors.Is(err, ErrNotAllowed) {
		t.Fatalf("got %v; want a ClusterError wrapping a NoProviderError", err)
	}
	if clusterErr.Namespace != "fleet" || clusterErr.Name != "prefs" || len(none.Reasons) != 3 {
		t.Errorf("error names %s/%s with %d reasons: %v", clusterErr.Namespace, clusterErr.Name, len(none.Reasons), err)
	}
	for _, want := range []string{"laptop (exec)", "not among ResolverOptions.ExecPlugins", "controller (secret): type not among the preferred [exec]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}

	unknown := offlineCluster("unknown", testServer, nil, provider("v", "vault", map[string]string{"path": "kv/x"}))
	if err := resolveErr(t, ResolverOptions{}, unknown); !errors.Is(err, ErrUnknownProviderType) {
		t.Errorf("unknown type: %v", err)
	}
	if _, err := NewResolver(ResolverOptions{Prefer: []string{"vault"}}); !errors.Is(err, ErrUnknownProviderType) {
		t.Errorf("NewResolver with an unknown preferred type: %v", err)
	}
}

// Tool authors register provider types of their own.
func TestCustomProvider(t *testing.T) {
	realservers.Required(t)
	var seen *Request
	vault := ProviderFunc(func(_ context.Context, req *Request) (*Credentials, error) {
		seen = req
		return &Credentials{BearerToken: "from-vault:" + req.Config("path", "")}, nil
	})
	c := offlineCluster("custom", testServer, nil, provider("v", "vault", map[string]string{"path": "kv/members/custom"}))
	a, err := newResolver(t, ResolverOptions{Providers: map[string]Provider{"vault": vault}}).Resolve(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.BearerToken != "from-vault:kv/members/custom" || a.ProviderType != "vault" {
		t.Errorf("custom provider result: %+v", a)
	}
	if seen.Server.String() != testServer || seen.Cluster.Name != "custom" {
		t.Errorf("custom provider was asked for %s on %s", seen.Cluster.Name, seen.Server)
	}
	if _, err := NewResolver(ResolverOptions{Providers: map[string]Provider{"nil": nil}}); err == nil {
		t.Error("NewResolver accepted a nil provider")
	}
}

// Resolution never changes the Cluster or anything shared between resolutions: a peer library
// appended exec args to a shared config on every call.
func TestResolutionMutatesNothing(t *testing.T) {
	realservers.Required(t)
	c := offlineCluster("pure", testServer, nil, provider("p", v1alpha1.ProviderTypeExec, map[string]string{
		"command": "login", "args": `["--cluster", "pure"]`, "env": "A=1", "provideClusterInfo": "true",
	}))
	pristine := c.DeepCopy()
	r := newResolver(t, ResolverOptions{ExecPlugins: []ExecPlugin{{Command: "login", ClusterArgs: true, ClusterEnv: []string{"A"}, SendTo: AnyServer()}}})
	var configs []*Resolved
	for i := range 5 {
		r.Forget("fleet", "pure") // resolve from scratch each time
		a, err := r.Resolve(testContext(t), c)
		if err != nil {
			t.Fatal(err)
		}
		configs = append(configs, a)
		if got := a.Config.ExecProvider.Args; !reflect.DeepEqual(got, []string{"--cluster", "pure"}) {
			t.Fatalf("resolution %d: exec args %q", i, got)
		}
	}
	configs[0].Config.ExecProvider.Args[0] = "changed by a caller"
	configs[0].Config.ExecProvider.Env[0].Value = "changed"
	if configs[1].Config.ExecProvider.Args[0] != "--cluster" || configs[1].Config.ExecProvider.Env[0].Value != "1" {
		t.Error("two resolutions share exec args or env")
	}
	if !reflect.DeepEqual(c, pristine) {
		t.Errorf("Resolve changed the Cluster:\n%+v\n%+v", c.Spec, pristine.Spec)
	}
}

// nowhere is a tunnel that is never dialled: resolving builds no connection.
type nowhere struct{}

func (nowhere) DialContext(context.Context, string, string) (net.Conn, error) {
	return nil, errors.New("not dialled in this test")
}

// The caller's own credentials (a token file under a FileRoot, an exec plugin, a kubeconfig of
// the caller's) are pinned to servers: a tunnelled Cluster's server is an address in the member's
// own network, answered for by whichever agent the Cluster names, so they are never sent there.
func TestTheCallersCredentialsGoThroughNoTunnel(t *testing.T) {
	root := t.TempDir()
	token := filepath.Join(root, "token")
	if err := os.WriteFile(token, []byte("caller-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := ResolverOptions{
		Tunnel:      nowhere{},
		FileRoots:   []FileRoot{{Dir: root, SendTo: Servers(testServer)}},
		ExecPlugins: []ExecPlugin{{Command: "cloud-login", SendTo: Servers(testServer)}},
	}
	for name, p := range map[string]v1alpha1.AuthProviderConfig{
		"token file": provider("p", v1alpha1.ProviderTypeTokenFile, map[string]string{"path": token}),
		"exec":       provider("p", v1alpha1.ProviderTypeExec, map[string]string{"command": "cloud-login"}),
	} {
		direct := offlineCluster("direct", testServer, nil, p)
		if err := resolveErr(t, opts, direct); err != nil {
			t.Fatalf("%s, dialled directly: %v", name, err)
		}
		tunnelled := offlineCluster("tunnelled", testServer, nil, p)
		tunnelled.Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{Agent: "edge"}
		err := resolveErr(t, opts, tunnelled)
		if !isPinning(err) || !strings.Contains(err.Error(), `reached through tunnel agent "edge"`) || strings.Contains(err.Error(), "caller-token") {
			t.Errorf("%s, through a tunnel: %v", name, err)
		}
	}
}
