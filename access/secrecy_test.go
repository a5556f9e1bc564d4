package access

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// No token, password or key reaches an error or a log line. The test plants a unique value in
// every place a credential can be, drives each into an error or a successful resolution, and
// scans every error and every line the Resolver logged at full verbosity.
func TestNoCredentialInErrorsOrLogs(t *testing.T) {
	realservers.Required(t)
	plant := func(i int) string { return fmt.Sprintf("PLANTED-%d-c0ffee", i) }
	dir := t.TempDir()
	secrets := &memSecrets{}
	put := func(name string, annotations map[string]string, data map[string][]byte) {
		secrets.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name, Annotations: annotations}, Data: data})
	}
	fake := newFakeMember(t, plant(5))
	pinned := pinnedTo(fake.URL)

	put("unpinned", nil, map[string][]byte{"token": []byte(plant(1))})
	put("garbage-kubeconfig", nil, map[string][]byte{"value": []byte("clusters: [" + plant(2) + "\n  users: {")})
	put("no-usable-keys", pinned, map[string][]byte{"password": []byte(plant(3)), "username": []byte("u")})
	put("good", pinned, map[string][]byte{"token": []byte(plant(5))})
	put("bad-pem", pinned, map[string][]byte{"tls.crt": []byte(plant(8)), "tls.key": []byte(plant(9))})
	put("kc-elsewhere-kubeconfig", nil, map[string][]byte{"value": []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://elsewhere.example.com"}}]
users: [{name: u, user: {token: ` + plant(6) + `}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)})
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), []byte("users: "+plant(11)+" ]"), 0o600); err != nil {
		t.Fatal(err)
	}

	var logMu sync.Mutex
	var logs strings.Builder
	logger := funcr.New(func(prefix, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{Verbosity: 10})
	r := newResolver(t, ResolverOptions{
		Secrets: secrets, Logger: logger, FileRoots: []FileRoot{{Dir: dir, SendTo: AnyServer()}},
		ExecPlugins: []ExecPlugin{{Command: "login", ClusterEnv: []string{"A"}, SendTo: AnyServer()}},
	})

	cases := map[string]*v1alpha1.Cluster{
		"unpinned secret":         offlineCluster("c1", fake.URL, fake.caPEM(), provider("p", "secret", map[string]string{"name": "unpinned"})),
		"kubeconfig not parsable": offlineCluster("c2", fake.URL, fake.caPEM(), provider("p", "kubeconfig-secret", map[string]string{"name": "garbage-kubeconfig"})),
		"no token or tls keys":    offlineCluster("c3", fake.URL, fake.caPEM(), provider("p", "secret", map[string]string{"name": "no-usable-keys"})),
		"exec env word":           offlineCluster("c4", fake.URL, fake.caPEM(), provider("p", "exec", map[string]string{"command": "login", "env": "A=1 " + plant(4)})),
		"kubeconfig elsewhere":    offlineCluster("c6", fake.URL, fake.caPEM(), provider("p", "kubeconfig-secret", map[string]string{"name": "kc-elsewhere-kubeconfig"})),
		"user info in address":    offlineCluster("c7", "https://admin:"+plant(7)+"@"+strings.TrimPrefix(fake.URL, "https://"), fake.caPEM(), provider("p", "secret", map[string]string{"name": "good"})),
		"not PEM":                 offlineCluster("c8", fake.URL, fake.caPEM(), provider("p", "secret", map[string]string{"name": "bad-pem"})),
		"kubeconfig file garbage": offlineCluster("c11", fake.URL, fake.caPEM(), provider("p", "kubeconfig-file", map[string]string{"path": filepath.Join(dir, "kubeconfig")})),
	}
	var texts []string
	for name, c := range cases {
		if _, err := r.Resolve(testContext(t), c); err == nil {
			t.Errorf("%s: resolved; the test expects an error", name)
		} else {
			texts = append(texts, name+": "+err.Error())
		}
	}
	// A good resolution, used: logs and the member's answers pass through the same code.
	a, err := r.Resolve(testContext(t), offlineCluster("c5", fake.URL, fake.caPEM(), provider("p", "secret", map[string]string{"name": "good"})))
	if err != nil {
		t.Fatal(err)
	}
	serverVersion(t, a)
	texts = append(texts, logs.String())

	for _, text := range texts {
		for i := 1; i <= 11; i++ { // 10 is unused
			if strings.Contains(text, plant(i)) {
				t.Errorf("planted credential %d appears in:\n%s", i, text)
			}
		}
	}
	if !strings.Contains(logs.String(), "resolved cluster") {
		t.Errorf("expected the resolution to be logged; logs:\n%s", logs.String())
	}
	if testing.Verbose() {
		t.Log(strings.Join(texts, "\n"))
	}
}

// No part of a Cluster's config value appears in an error: a value may be a credential pasted into
// the wrong key (a base64 token with its trailing "=" looks like an env word, a JWT like a Secret
// name). Each key of each built-in type gets such a value in turn, beside otherwise working
// pointers, and every error is searched for any eight characters of it.
func TestNoConfigValueInErrors(t *testing.T) {
	realservers.Required(t)
	const planted = "c2VjcmV0LXBsYW50ZWQtdG9rZW4="
	dir := t.TempDir()
	secrets := &memSecrets{}
	secrets.put(tokenSecret("fleet", "creds", "tok", pinnedTo(testServer)))
	kubeconfig := []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "` + testServer + `"}}]
users: [{name: u, user: {token: tok}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`)
	secrets.put(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "kc"}, Data: map[string][]byte{"value": kubeconfig}})
	if err := os.WriteFile(filepath.Join(dir, "kubeconfig"), kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	r := newResolver(t, ResolverOptions{
		Secrets:     secrets,
		FileRoots:   []FileRoot{{Dir: dir, SendTo: AnyServer()}},
		ExecPlugins: []ExecPlugin{{Command: "login", Args: []string{"get-token"}, ClusterEnv: []string{"A"}, ClusterConfig: GivenClusterConfig, SendTo: AnyServer()}},
	})
	working := map[string]map[string]string{
		v1alpha1.ProviderTypeSecret:           {"name": "creds", "namespace": "fleet"},
		v1alpha1.ProviderTypeKubeconfigSecret: {"name": "kc", "namespace": "fleet", "key": "value", "context": "x"},
		v1alpha1.ProviderTypeKubeconfigFile:   {"path": filepath.Join(dir, "kubeconfig"), "context": "x"},
		v1alpha1.ProviderTypeTokenFile:        {"path": filepath.Join(dir, "kubeconfig")},
		v1alpha1.ProviderTypeExec: {"command": "login", "args": "get-token", "env": "A=1", "apiVersion": "client.authentication.k8s.io/v1",
			"provideClusterInfo": "true", "clusterConfig": `{"a": 1}`},
	}
	for typ, config := range working {
		for key := range config {
			t.Run(typ+"/"+key, func(t *testing.T) {
				bad := maps.Clone(config)
				switch key {
				case "env": // a pasted value after a good word
					bad[key] = "A=1 " + planted
				case "args":
					bad[key] = "get-token " + planted
				default:
					bad[key] = planted
				}
				_, err := r.Resolve(testContext(t), offlineCluster("c", testServer, nil, provider("p", typ, bad)))
				if err == nil {
					t.Fatalf("resolved with %s=%s", key, bad[key])
				}
				for i := 0; i+8 <= len(planted); i++ {
					if strings.Contains(err.Error(), planted[i:i+8]) {
						t.Fatalf("the error repeats part of config.%s: %v", key, err)
					}
				}
			})
		}
	}
}
