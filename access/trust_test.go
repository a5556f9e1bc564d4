package access

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// These tests play the attacker: someone who can write Clusters and Secrets in one cluster set of a
// real registry, and runs a server of their own (the harvester) that records every Authorization
// header it is sent. Whatever they write, the reader's credentials reach only the servers the
// credentials' store or the reader names.

// storedCluster writes a Cluster as the attacker would, pointing at server and trusting ca, and
// returns it as the registry serves it.
func storedCluster(t *testing.T, ns, name, server string, ca []byte, providers ...v1alpha1.AuthProviderConfig) *v1alpha1.Cluster {
	t.Helper()
	c := offlineCluster(name, server, ca, providers...)
	c.Namespace, c.UID = ns, ""
	created, err := versioned.NewForConfigOrDie(registry.Config).ClusterregistryV1alpha1().Clusters(ns).Create(testContext(t), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// attempt resolves c and, if that works, uses the Resolved as a tool would; it returns what went
// wrong, or nil.
func attempt(t *testing.T, r *Resolver, c *v1alpha1.Cluster) error {
	t.Helper()
	a, err := r.Resolve(testContext(t), c)
	if err != nil {
		return err
	}
	return useMember(testContext(t), a)
}

// attackScene is a cluster set of the attacker's in the registry, their harvester, and a directory
// of the reader's holding a token file for the member.
func attackScene(t *testing.T) (ns string, harvester *fakeMember, dir, tokenPath string) {
	t.Helper()
	ns = fleetmain.Namespace(t, registry)
	harvester = newFakeMember(t, "never")
	dir = t.TempDir()
	tokenPath = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(memberToken(t, fleetmain.Namespace(t, member), "reader")), 0o600); err != nil {
		t.Fatal(err)
	}
	return ns, harvester, dir, tokenPath
}

func requireNothingHarvested(t *testing.T, harvester *fakeMember) {
	t.Helper()
	if seen := harvester.requests(); len(seen) > 0 {
		t.Fatalf("the harvester received %d requests, with Authorization %q", len(seen), seen)
	}
}

// The reader's own token file and exec plugin are tied to the member by the reader; a Cluster
// moved to the harvester cannot have them. The same Cluster on the member works.
func TestReaderCredentialsGoOnlyWhereTheReaderSends(t *testing.T) {
	realservers.Required(t)
	ns, harvester, dir, tokenPath := attackScene(t)
	plugin := buildExecPlugin(t)
	r := newResolver(t, ResolverOptions{
		FileRoots: []FileRoot{{Dir: dir, SendTo: Servers(member.URL())}},
		ExecPlugins: []ExecPlugin{{
			Command:    plugin,
			Env:        map[string]string{"TEST_TOKEN_FILE": tokenPath, "TEST_COUNT_FILE": filepath.Join(dir, "count")},
			ClusterEnv: []string{"TEST_EXPIRY_SECONDS"},
			SendTo:     Servers(member.URL()),
		}},
	})

	for _, p := range []v1alpha1.AuthProviderConfig{
		provider("projected", v1alpha1.ProviderTypeTokenFile, map[string]string{"path": tokenPath}),
		// The attacker also picks the args and env they may.
		provider("cloud", v1alpha1.ProviderTypeExec, map[string]string{"command": plugin, "env": "TEST_EXPIRY_SECONDS=60", "provideClusterInfo": "true"}),
	} {
		t.Run(p.Type.Name, func(t *testing.T) {
			moved := storedCluster(t, ns, "moved-"+p.Type.Name, harvester.URL, harvester.caPEM(), p)
			err := attempt(t, r, moved)
			var pinErr *PinningError
			var clusterErr *ClusterError
			if !errors.As(err, &pinErr) || !errors.As(err, &clusterErr) {
				t.Fatalf("got %v; want a ClusterError wrapping a PinningError", err)
			}
			for _, want := range []string{"cluster " + ns + "/moved-" + p.Type.Name, p.Name + " (" + p.Type.Name + ")", ".SendTo does not allow", harvester.URL} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q: %v", want, err)
				}
			}
			if strings.Contains(err.Error(), tokenPath) || strings.Contains(err.Error(), plugin) {
				t.Errorf("the refusal repeats a config value: %v", err)
			}
			requireNothingHarvested(t, harvester)

			good := storedCluster(t, ns, "good-"+p.Type.Name, member.URL(), member.Config.CAData, p)
			if err := attempt(t, r, good); err != nil {
				t.Fatalf("the same provider on the member: %v", err)
			}
		})
	}
}

// A kubeconfig Secret's own server pins the data inside it, not the reader's files and plugins
// that it names: those are refused unless the reader allows them, and then go only where the
// reader's FileRoots and ExecPlugins send them.
func TestKubeconfigSecretCannotNameTheReadersCredentials(t *testing.T) {
	realservers.Required(t)
	ns, harvester, dir, tokenPath := attackScene(t)
	plugin := buildExecPlugin(t)
	kubeconfig := func(server, user string) []byte {
		return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, user))
	}
	tokenFileUser := fmt.Sprintf("{tokenFile: %q}", tokenPath)
	// BASH_ENV would make the plugin's shell (were it a script) run a file of the attacker's choosing.
	execUser := fmt.Sprintf("{exec: {command: %q, apiVersion: client.authentication.k8s.io/v1, env: [{name: BASH_ENV, value: /tmp/attacker.sh}]}}", plugin)
	putSecret(t, ns, "to-harvester-kubeconfig", nil, map[string][]byte{"value": kubeconfig(harvester.URL, tokenFileUser)})
	putSecret(t, ns, "exec-harvester-kubeconfig", nil, map[string][]byte{"value": kubeconfig(harvester.URL, execUser)})
	putSecret(t, ns, "to-member-kubeconfig", nil, map[string][]byte{"value": kubeconfig(member.URL(), tokenFileUser)})
	toHarvester := storedCluster(t, ns, "to-harvester", harvester.URL, harvester.caPEM(), provider("kc", v1alpha1.ProviderTypeKubeconfigSecret, nil))
	execHarvester := storedCluster(t, ns, "exec-harvester", harvester.URL, harvester.caPEM(), provider("kc", v1alpha1.ProviderTypeKubeconfigSecret, nil))
	toMember := storedCluster(t, ns, "to-member", member.URL(), member.Config.CAData, provider("kc", v1alpha1.ProviderTypeKubeconfigSecret, nil))

	roots := []FileRoot{{Dir: dir, SendTo: Servers(member.URL())}}
	plugins := []ExecPlugin{{Command: plugin, SendTo: AnyServer()}}
	strict := newResolver(t, ResolverOptions{FileRoots: roots, ExecPlugins: plugins})
	for _, c := range []*v1alpha1.Cluster{toHarvester, execHarvester, toMember} {
		err := attempt(t, strict, c)
		if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "ResolverOptions.AllowKubeconfigSecretRefs") {
			t.Errorf("%s without AllowKubeconfigSecretRefs: %v", c.Name, err)
		}
	}

	relaxed := newResolver(t, ResolverOptions{FileRoots: roots, ExecPlugins: plugins, AllowKubeconfigSecretRefs: true})
	if err := attempt(t, relaxed, toHarvester); !isPinning(err) || !strings.Contains(err.Error(), "ResolverOptions.FileRoots[0].SendTo") {
		t.Errorf("the reader's token file, named by a Secret pinned to the harvester: %v", err)
	}
	// The plugin may go anywhere, but not with a variable the reader did not allow.
	if err := attempt(t, relaxed, execHarvester); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "ResolverOptions.ExecPlugins[0].ClusterEnv") ||
		strings.Contains(err.Error(), "BASH_ENV") {
		t.Errorf("an exec plugin with BASH_ENV, named by a Secret: %v", err)
	}
	requireNothingHarvested(t, harvester)
	if err := attempt(t, relaxed, toMember); err != nil {
		t.Errorf("the reader's token file, allowed and sent to the member: %v", err)
	}
}

// A Secret pinned to a server and carrying that server's CA: the Cluster's editor sets a caBundle
// of theirs, and whoever answers at the pinned address with that CA's certificate (here the
// harvester, as one on the network path would) must not receive the token. The Secret's own CA
// verifies the server; the Cluster's caBundle serves only credentials without one.
func TestCredentialCAOverridesTheClustersCABundle(t *testing.T) {
	realservers.Required(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	harvester := newFakeMember(t, "never")
	token := memberToken(t, memberNS, "pinned")
	// The pinned address is answered by the harvester, whose certificate the member's CA did not sign.
	putSecret(t, ns, "intercepted", pinnedTo(harvester.URL), map[string][]byte{"token": []byte(token), "ca.crt": member.Config.CAData})
	intercepted := storedCluster(t, ns, "intercepted", harvester.URL, harvester.caPEM(),
		provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "intercepted"}))
	r := newResolver(t, ResolverOptions{})
	err := attempt(t, r, intercepted)
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("got %v; want the harvester's certificate refused", err)
	}
	requireNothingHarvested(t, harvester)

	// The other way round: a wrong caBundle on the Cluster does not stop a Secret with the right CA.
	putSecret(t, ns, "right-ca", pinnedTo(member.URL()), map[string][]byte{"token": []byte(token), "ca.crt": member.Config.CAData})
	wrongBundle := storedCluster(t, ns, "wrong-bundle", member.URL(), harvester.caPEM(),
		provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "right-ca"}))
	if err := attempt(t, r, wrongBundle); err != nil {
		t.Errorf("the Secret's CA should verify the member: %v", err)
	}
}

// CA rotation: while a member's serving CA changes, the Secret carries both CAs, and the member
// is reached whichever one signed its certificate.
func TestSecretWithTwoCAsForRotation(t *testing.T) {
	realservers.Required(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	other := newFakeMember(t, "never") // its CA stands for the CA the member moves to, or from
	token := memberToken(t, memberNS, "rotating")
	for _, order := range []struct {
		name string
		cas  []byte
	}{
		{"old-first", append(append([]byte{}, member.Config.CAData...), other.caPEM()...)},
		{"new-first", append(append([]byte{}, other.caPEM()...), member.Config.CAData...)},
	} {
		putSecret(t, ns, order.name, pinnedTo(member.URL()), map[string][]byte{"token": []byte(token), "ca.crt": order.cas})
		c := storedCluster(t, ns, order.name, member.URL(), nil,
			provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": order.name}))
		if err := attempt(t, newResolver(t, ResolverOptions{}), c); err != nil {
			t.Errorf("%s: the member, whose CA is one of the two, was not reached: %v", order.name, err)
		}
	}
}

// SIG-Multicluster's ClusterProfile access-provider plugins work unchanged: the caller sends the
// Cluster's name as spec.cluster.config (ClusterNameConfig), with the plugin's own args and env
// from the caller's side, and the plugin reads the member's token from the registry.
func TestClusterProfilePluginWorksUnchanged(t *testing.T) {
	realservers.Required(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	dir := t.TempDir()
	plugin := buildTestCommand(t, "secretreader")
	// The plugin finds the registry, and the namespace it reads, through $KUBECONFIG.
	kcfg, err := clientcmd.LoadFromFile(registry.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range kcfg.Contexts {
		c.Namespace = ns
	}
	registryKubeconfig := filepath.Join(dir, "registry.kubeconfig")
	if err := clientcmd.WriteToFile(*kcfg, registryKubeconfig); err != nil {
		t.Fatal(err)
	}
	putSecret(t, ns, "profiled", nil, map[string][]byte{"token": []byte(memberToken(t, memberNS, "profiled"))})
	putSecret(t, ns, "other", nil, map[string][]byte{"token": []byte(memberToken(t, memberNS, "other"))})

	errorFile := filepath.Join(dir, "plugin-error")
	readerPlugin := ExecPlugin{
		Command: plugin,
		Env:     map[string]string{"KUBECONFIG": registryKubeconfig, "SECRETREADER_ERROR_FILE": errorFile},
		SendTo:  Servers(member.URL()),
	}
	p := provider("secretreader", v1alpha1.ProviderTypeExec, map[string]string{
		"command": plugin, "apiVersion": "client.authentication.k8s.io/v1beta1", "provideClusterInfo": "true",
		"clusterConfig": `{"clusterName": "other"}`,
	})
	c := storedCluster(t, ns, "profiled", member.URL(), member.Config.CAData, p)

	// Off by default: the plugin gets no cluster config, and says what it misses.
	err = attempt(t, newResolver(t, ResolverOptions{ExecPlugins: []ExecPlugin{readerPlugin}}), c)
	if said, _ := os.ReadFile(errorFile); err == nil || string(said) != "missing clusterName in ExecCredential.Spec.Cluster.Config" {
		t.Errorf("without ClusterConfig: %v; the plugin said %q", err, said)
	}

	byName := readerPlugin
	byName.ClusterConfig = ClusterNameConfig
	r := newResolver(t, ResolverOptions{ExecPlugins: []ExecPlugin{byName}})
	if err := attempt(t, r, c); err != nil {
		t.Fatalf("with ClusterNameConfig: %v", err)
	}
	a, _ := r.Resolve(testContext(t), c)
	if got := string(execClusterConfig(a.Config.ExecProvider)); got != `{"clusterName":"profiled"}` || !a.Config.ExecProvider.ProvideClusterInfo {
		t.Errorf("cluster config %s, provideClusterInfo %v", got, a.Config.ExecProvider.ProvideClusterInfo)
	}

	// The Cluster's own clusterConfig, passed on by the caller's choice; editing it takes effect.
	given := readerPlugin
	given.ClusterConfig = GivenClusterConfig
	r = newResolver(t, ResolverOptions{ExecPlugins: []ExecPlugin{given}})
	first, err := r.Resolve(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := useMember(testContext(t), first); err != nil {
		t.Fatalf("with the Cluster's clusterConfig: %v", err)
	}
	edited := c.DeepCopy()
	edited.Spec.AuthInfo.Providers[0].Config["clusterConfig"] = `{"clusterName": "profiled"}`
	second, err := r.Resolve(testContext(t), edited)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || string(execClusterConfig(second.Config.ExecProvider)) != `{"clusterName": "profiled"}` {
		t.Errorf("an edited clusterConfig kept the old Resolved")
	}

	requireExecExtensionOfAKubeconfig(t, ns, dir, plugin, given)
}

// requireExecExtensionOfAKubeconfig: in a kubeconfig of the caller's, its cluster's
// client.authentication.k8s.io/exec extension is the plugin's cluster config, as client-go passes
// it; and that kubeconfig chooses its plugin's args and env (only the command must be listed).
func requireExecExtensionOfAKubeconfig(t *testing.T, ns, dir, plugin string, given ExecPlugin) {
	t.Helper()
	kubeconfigPath := filepath.Join(dir, "members.kubeconfig")
	if err := os.WriteFile(kubeconfigPath, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: m
  cluster:
    server: %q
    certificate-authority-data: %s
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {clusterName: profiled}
users: [{name: u, user: {exec: {command: %q, args: [--from-kubeconfig], env: [{name: FROM_KUBECONFIG, value: "yes"}], apiVersion: client.authentication.k8s.io/v1beta1, provideClusterInfo: true}}}]
contexts: [{name: x, context: {cluster: m, user: u}}]
current-context: x
`, member.URL(), base64.StdEncoding.EncodeToString(member.Config.CAData), plugin)), 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile := storedCluster(t, ns, "from-file", member.URL(), nil,
		provider("file", v1alpha1.ProviderTypeKubeconfigFile, map[string]string{"path": kubeconfigPath}))
	pinnedByFile := given
	pinnedByFile.SendTo = nil // the caller's own kubeconfig pins its plugin
	r := newResolver(t, ResolverOptions{FileRoots: []FileRoot{{Dir: dir}}, ExecPlugins: []ExecPlugin{pinnedByFile}})
	if err := attempt(t, r, fromFile); err != nil {
		t.Errorf("kubeconfig file with the exec extension: %v", err)
	}
	// The caller's own kubeconfig chooses its plugin's args and env; only the command must be listed.
	if a, err := r.Resolve(testContext(t), fromFile); err != nil || strings.Join(a.Config.ExecProvider.Args, " ") != "--from-kubeconfig" ||
		!slices.Contains(a.Config.ExecProvider.Env, clientcmdapi.ExecEnvVar{Name: "FROM_KUBECONFIG", Value: "yes"}) {
		t.Errorf("the kubeconfig's own args and env: %v", err)
	}
}
