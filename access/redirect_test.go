package access

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// These tests play a member that answers with redirects: a tenant's pod behind the services/pods
// proxy subresource, an aggregated API or a gateway can shape one answer of a member's API server.
// Its credentials are pinned to that server, so the redirect must not carry them anywhere else:
// not to a plain http listener, where they would travel in clear text, nor to another https
// server that the same CA vouches for.

// catcher is a server that must receive nothing: it records every request and every TLS handshake.
type catcher struct {
	*httptest.Server
	handshakes atomic.Int32
	mu         sync.Mutex
	seen       []string
}

func newCatcher(t *testing.T, useTLS bool) *catcher {
	c := &catcher{}
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.seen = append(c.seen, fmt.Sprintf("%s %s Authorization=%q client certificates=%d", r.Method, r.URL, r.Header.Get("Authorization"), tlsPeers(r)))
		c.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	if useTLS {
		// The same certificate as the hostile member's (httptest's), so the member's CA vouches for it;
		// it asks for a client certificate, which a client would present during the handshake.
		c.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c.handshakes.Add(1)
			return nil, nil
		}}
		c.StartTLS()
	} else {
		c.Start()
	}
	t.Cleanup(c.Close)
	return c
}

func tlsPeers(r *http.Request) int {
	if r.TLS == nil {
		return 0
	}
	return len(r.TLS.PeerCertificates)
}

func (c *catcher) requireNothing(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) > 0 || c.handshakes.Load() > 0 {
		t.Fatalf("%s received %d TLS handshakes and %d requests: %q", c.URL, c.handshakes.Load(), len(c.seen), c.seen)
	}
}

// redirector is the hostile member: /version answers, /same/... redirects to /version on itself,
// and anything else redirects to the current target with the current status.
type redirector struct {
	*httptest.Server
	target atomic.Value // string
	status atomic.Int32
}

func newRedirector(t *testing.T) *redirector {
	r := &redirector{}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case req.URL.Path == "/version":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
		case strings.HasPrefix(req.URL.Path, "/same/"):
			http.Redirect(w, req, "/version", http.StatusFound)
		default:
			http.Redirect(w, req, r.target.Load().(string)+req.URL.RequestURI(), int(r.status.Load()))
		}
	}))
	t.Cleanup(r.Close)
	return r
}

func TestRedirectsDoNotCarryCredentials(t *testing.T) {
	realservers.Required(t)
	ns := fleetmain.Namespace(t, registry)
	hostile := newRedirector(t)
	hostileCA := (&fakeMember{Server: hostile.Server}).caPEM()
	targets := map[string]*catcher{"http": newCatcher(t, false), "https": newCatcher(t, true)}

	const token = "pinned-token-that-must-stay-home"
	certPEM, keyPEM := testcerts.ClientCertPEM("pinned-client")
	putSecret(t, ns, "token", pinnedTo(hostile.URL), map[string][]byte{"token": []byte(token)})
	putSecret(t, ns, "cert", pinnedTo(hostile.URL), map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM})
	dir := t.TempDir()
	tokenPath := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenPath, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	plugin := buildExecPlugin(t)
	r := newResolver(t, ResolverOptions{ExecPlugins: []ExecPlugin{{
		Command: plugin,
		Env:     map[string]string{"TEST_TOKEN_FILE": tokenPath, "TEST_COUNT_FILE": filepath.Join(dir, "count")},
		SendTo:  Servers(hostile.URL),
	}}})
	clusters := []v1alpha1.Cluster{
		*storedCluster(t, ns, "by-token", hostile.URL, hostileCA, provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "token"})),
		*storedCluster(t, ns, "by-certificate", hostile.URL, hostileCA, provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "cert"})),
		*storedCluster(t, ns, "by-exec", hostile.URL, hostileCA, provider("p", v1alpha1.ProviderTypeExec, map[string]string{"command": plugin})),
	}

	// Each way a tool reaches a member, with one request that the member redirects. The first
	// four build clients as multicluster.Member does: on the Resolved's Config and HTTPClient.
	uses := redirectedUses(r.Resolve, hostile.URL)

	statuses := []int{http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect}
	i := 0
	for _, scheme := range []string{"http", "https"} {
		target := targets[scheme]
		for name, use := range uses {
			status := statuses[i%len(statuses)]
			i++
			t.Run(fmt.Sprintf("%s to %s (%d)", name, scheme, status), func(t *testing.T) {
				hostile.target.Store(target.URL)
				hostile.status.Store(int32(status))
				requireOffServer(t, clusters, use, target.URL, scheme, status, token)
				target.requireNothing(t)
			})
		}
	}

	// A redirect within the member's own server is still followed.
	t.Run("same server", func(t *testing.T) {
		for i := range clusters {
			a, err := r.Resolve(testContext(t), &clusters[i])
			if err != nil {
				t.Fatal(err)
			}
			resp, err := a.HTTPClient.Get(hostile.URL + "/same/x")
			if err != nil {
				t.Fatalf("%s: %v", clusters[i].Name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "v1.36.3") {
				t.Fatalf("%s: %s %s", clusters[i].Name, resp.Status, body)
			}
		}
	})
}

// resolveFunc is Resolver.Resolve.
type resolveFunc = func(ctx context.Context, c *v1alpha1.Cluster) (*Resolved, error)

// redirectedUses are the ways a tool reaches a member, each with one request that the member
// redirects. The first four build clients as multicluster.Member does: on the Resolved's Config
// and HTTPClient.
func redirectedUses(resolve resolveFunc, memberURL string) map[string]func(ctx context.Context, c *v1alpha1.Cluster) error {
	uses := map[string]func(ctx context.Context, c *v1alpha1.Cluster) error{
		"clientset GET": func(ctx context.Context, c *v1alpha1.Cluster) error {
			kube, err := clientsetOf(ctx, resolve, c)
			if err != nil {
				return err
			}
			_, err = kube.CoreV1().ConfigMaps("default").Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"clientset POST": func(ctx context.Context, c *v1alpha1.Cluster) error {
			kube, err := clientsetOf(ctx, resolve, c)
			if err != nil {
				return err
			}
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}} // one each: encoding sets its kind
			_, err = kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
			return err
		},
		"dynamic client GET": func(ctx context.Context, c *v1alpha1.Cluster) error {
			a, err := resolve(ctx, c)
			if err != nil {
				return err
			}
			dyn, err := dynamic.NewForConfigAndClient(a.Config, a.HTTPClient)
			if err != nil {
				return err
			}
			_, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace("default").Get(ctx, "x", metav1.GetOptions{})
			return err
		},
		"controller-runtime client GET": func(ctx context.Context, c *v1alpha1.Cluster) error {
			a, err := resolve(ctx, c)
			if err != nil {
				return err
			}
			crc, err := client.New(a.Config, client.Options{HTTPClient: a.HTTPClient})
			if err != nil {
				return err
			}
			return crc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "x"}, &corev1.ConfigMap{})
		},
	}
	maps.Copy(uses, configUses(resolve, memberURL))
	return uses
}

// configUses are the ways a tool reaches a member with clients of its own, from Resolved.Config,
// or with Resolved.HTTPClient alone.
func configUses(resolve resolveFunc, memberURL string) map[string]func(ctx context.Context, c *v1alpha1.Cluster) error {
	return map[string]func(ctx context.Context, c *v1alpha1.Cluster) error{
		"a clientset of the caller's from Resolved.Config": func(ctx context.Context, c *v1alpha1.Cluster) error {
			a, err := resolve(ctx, c)
			if err != nil {
				return err
			}
			kube, err := kubernetes.NewForConfig(rest.CopyConfig(a.Config))
			if err != nil {
				return err
			}
			_, err = kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
			return err
		},
		"a discovery client from Resolved.Config": func(ctx context.Context, c *v1alpha1.Cluster) error {
			a, err := resolve(ctx, c)
			if err != nil {
				return err
			}
			d, err := discovery.NewDiscoveryClientForConfig(a.Config)
			if err != nil {
				return err
			}
			_, err = d.ServerGroups()
			return err
		},
		"Resolved.HTTPClient": func(ctx context.Context, c *v1alpha1.Cluster) error {
			a, err := resolve(ctx, c)
			if err != nil {
				return err
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, memberURL+"/apis/x", strings.NewReader("{}"))
			resp, err := a.HTTPClient.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return fmt.Errorf("answered %s", resp.Status)
			}
			return err
		},
	}
}

// requireOffServer: use, on each of clusters, is refused with an *OffServerError that names the
// Cluster, the redirect's target and status, and holds no credential.
func requireOffServer(t *testing.T, clusters []v1alpha1.Cluster, use func(ctx context.Context, c *v1alpha1.Cluster) error, targetURL, scheme string, status int, token string) {
	t.Helper()
	for i := range clusters {
		c := &clusters[i]
		key := c.Namespace + "/" + c.Name
		err := use(testContext(t), c)
		var off *OffServerError
		if !errors.As(err, &off) || !errors.Is(err, ErrUnpinnedSecret) {
			t.Fatalf("%s: got %v; want an *OffServerError", key, err)
		}
		if off.Cluster != key || off.RedirectStatus != status {
			t.Errorf("%s: the error says cluster %q, status %d", key, off.Cluster, off.RedirectStatus)
		}
		targetHost := strings.TrimPrefix(targetURL, scheme+"://")
		for _, want := range []string{key, targetHost, fmt.Sprint(status)} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the error does not say %q: %v", key, want, err)
			}
		}
		if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "BEGIN") {
			t.Errorf("%s: the error holds a credential: %v", key, err)
		}
	}
}

// The check compares origins as URLs mean them, and keeps a server's path prefix: a gateway that
// serves several clusters under paths of one host cannot send one cluster's credentials to another.
func TestPinnedTransportOrigins(t *testing.T) {
	server, _ := url.Parse("https://GW.example.com/clusters/a/")
	pinned := pinTo("fleet/a", server)(roundTripFunc(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	for target, allowed := range map[string]bool{
		"https://GW.example.com/clusters/a/api":             true, // as resolved: the fast path
		"https://GW.example.com/clusters/b/api":             false,
		"https://gw.example.com/clusters/a":                 true,
		"https://gw.example.com:443/clusters/a/api/v1/pods": true,
		"https://gw.example.com/clusters/a/../b/api":        false,
		"https://gw.example.com/clusters/ab/api":            false,
		"https://gw.example.com/clusters/b/api":             false,
		"http://gw.example.com/clusters/a/api":              false,
		"https://gw.example.com:6443/clusters/a/api":        false,
		"https://gw.example.com.evil/clusters/a/api":        false,
	} {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		_, err := pinned.RoundTrip(req)
		var off *OffServerError
		if allowed != (err == nil) || (!allowed && (!errors.As(err, &off) || off.RedirectStatus != 0 || off.Server != "https://gw.example.com:443/clusters/a")) {
			t.Errorf("%s: got %v, want allowed=%v", target, err, allowed)
		}
	}
}

// clientsetOf is a clientset for c's member, built as multicluster.Member.Kubernetes builds it.
func clientsetOf(ctx context.Context, resolve func(context.Context, *v1alpha1.Cluster) (*Resolved, error), c *v1alpha1.Cluster) (kubernetes.Interface, error) {
	a, err := resolve(ctx, c)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfigAndClient(a.Config, a.HTTPClient)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
