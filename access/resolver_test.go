package access

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// fakeMember is a TLS server of the test's own standing in for a member: it answers /version to
// the bearer token it expects, and records every handshake and Authorization header it sees.
type fakeMember struct {
	*httptest.Server
	token      atomic.Value // string
	handshakes atomic.Int32
	mu         sync.Mutex
	authSeen   []string
}

func newFakeMember(t testing.TB, token string) *fakeMember {
	t.Helper()
	m := &fakeMember{}
	m.token.Store(token)
	m.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.authSeen = append(m.authSeen, r.Header.Get("Authorization"))
		m.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+m.token.Load().(string) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
	}))
	m.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		m.handshakes.Add(1)
		return nil, nil
	}}
	m.StartTLS()
	t.Cleanup(m.Close)
	return m
}

func (m *fakeMember) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.Certificate().Raw})
}

func (m *fakeMember) requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.authSeen...)
}

// offlineCluster is a Cluster object that need not be stored anywhere.
func offlineCluster(name, server string, ca []byte, providers ...v1alpha1.AuthProviderConfig) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", UID: types.UID("uid-" + name)},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}},
				CABundle:        ca,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: providers},
		},
	}
}

// memSecrets is a SecretGetter over a map, for tests of the Resolver's own logic.
type memSecrets struct {
	mu      sync.Mutex
	secrets map[string]*corev1.Secret
	reads   int
}

func (m *memSecrets) put(s *corev1.Secret) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.secrets == nil {
		m.secrets = map[string]*corev1.Secret{}
	}
	m.secrets[s.Namespace+"/"+s.Name] = s
}

func (m *memSecrets) GetSecret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	s, ok := m.secrets[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return s.DeepCopy(), nil
}

func tokenSecret(ns, name, token string, annotations map[string]string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Data:       map[string][]byte{"token": []byte(token)},
	}
}

// A Secret's token is rotated and the old one revoked: the Resolved in hand gets a 401, and the
// next Resolve reads the Secret again and works, with nothing restarted.
func TestRotatedSecretIsPickedUp(t *testing.T) {
	realservers.Required(t)
	ctx := testContext(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	putSecret(t, ns, "creds", pinnedTo(member.URL()), map[string][]byte{"token": []byte(memberToken(t, memberNS, "old"))})
	c := memberCluster(t, ns, "rotating", provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "creds"}))
	r := newResolver(t, ResolverOptions{RevalidateAfter: time.Hour}) // only the 401 may trigger the reread

	before, err := r.Resolve(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := useMember(ctx, before); err != nil {
		t.Fatal(err)
	}

	putSecret(t, ns, "creds", pinnedTo(member.URL()), map[string][]byte{"token": []byte(memberToken(t, memberNS, "new"))})
	if err := kubeClient(t, member).CoreV1().ServiceAccounts(memberNS).Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The member learns of the revocation through its own cache; wait until it refuses the token.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testTimeout, true, func(ctx context.Context) (bool, error) {
		err := useMember(ctx, before)
		return apierrors.IsUnauthorized(err), nil
	})
	if err != nil {
		t.Fatalf("the member never refused the revoked token: %v", err)
	}

	after, err := r.Resolve(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if after == before {
		t.Fatal("Resolve returned the Resolved the member refused")
	}
	if err := useMember(ctx, after); err != nil {
		t.Fatalf("with the rotated token: %v", err)
	}
}

// Whoever can edit a Cluster can point it at a server of their own. A Secret pinned to the real
// member keeps its token from going there: the test's server sees no request at all.
func TestPinningKeepsCredentialsFromOtherServers(t *testing.T) {
	realservers.Required(t)
	ctx := testContext(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	token := memberToken(t, memberNS, "pinned")
	putSecret(t, ns, "pinned", pinnedTo("https://unrelated.example.com", member.URL()), map[string][]byte{"token": []byte(token)})
	c := memberCluster(t, ns, "redirected", provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "pinned"}))
	r := newResolver(t, ResolverOptions{})
	if _, err := r.Resolve(ctx, c); err != nil {
		t.Fatalf("before the edit: %v", err)
	}

	attacker := newFakeMember(t, "whatever")
	c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = attacker.URL
	c.Spec.KubernetesAPIEndpoints.CABundle = attacker.caPEM()
	a, err := r.Resolve(ctx, c)
	var pinErr *PinningError
	if !errors.As(err, &pinErr) || !errors.Is(err, ErrUnpinnedSecret) || a != nil {
		t.Fatalf("got %v, %v; want a PinningError", a, err)
	}
	for _, want := range []string{ns + "/pinned", attacker.URL, "clusterregistry.k8s.io/servers", "redirected"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if seen := attacker.requests(); len(seen) != 0 {
		t.Errorf("the other server saw requests: %q", seen)
	}
	if strings.Contains(err.Error(), token) {
		t.Error("the error holds the token")
	}

	// A kubeconfig Secret is pinned by its own server.
	kubeconfig, err := member.AddUser("pin-user", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	putSecret(t, ns, "redirected-kubeconfig", nil, map[string][]byte{"value": kubeconfig})
	c.Spec.AuthInfo.Providers = []v1alpha1.AuthProviderConfig{provider("k", v1alpha1.ProviderTypeKubeconfigSecret, nil)}
	if _, err := r.Resolve(ctx, c); !errors.As(err, &pinErr) {
		t.Errorf("kubeconfig Secret sent to another server: %v", err)
	}
	if seen := attacker.requests(); len(seen) != 0 {
		t.Errorf("the other server saw requests: %q", seen)
	}
}

// A Secret that names no servers is refused by default with an error that says what to add, and
// used when the caller relaxes the rule.
func TestUnpinnedSecret(t *testing.T) {
	realservers.Required(t)
	fake := newFakeMember(t, "tok-unpinned")
	secrets := &memSecrets{}
	secrets.put(tokenSecret("fleet", "loose", "tok-unpinned", nil))
	c := offlineCluster("loose", fake.URL, fake.caPEM(), provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "loose"}))

	strict := newResolver(t, ResolverOptions{Secrets: secrets})
	_, err := strict.Resolve(testContext(t), c)
	if !errors.Is(err, ErrUnpinnedSecret) || !strings.Contains(err.Error(), "annotate the Secret with clusterregistry.k8s.io/servers="+fake.URL) {
		t.Fatalf("got %v; want an error naming the annotation to add", err)
	}

	relaxed := newResolver(t, ResolverOptions{Secrets: secrets, AllowUnpinnedSecrets: true})
	a, err := relaxed.Resolve(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kubernetes.NewForConfigAndClient(a.Config, a.HTTPClient); err != nil {
		t.Fatal(err)
	}
	// An annotation naming other servers still binds, relaxed or not.
	secrets.put(tokenSecret("fleet", "loose", "tok-unpinned", pinnedTo("https://elsewhere.example.com")))
	relaxed.Forget("fleet", "loose")
	if _, err := relaxed.Resolve(testContext(t), c); !errors.Is(err, ErrUnpinnedSecret) {
		t.Errorf("Secret pinned elsewhere was used: %v", err)
	}
}

// Members' clients have no client-side rate limit unless the caller sets one.
func TestRateLimits(t *testing.T) {
	token := ProviderFunc(func(context.Context, *Request) (*Credentials, error) {
		return &Credentials{BearerToken: "t"}, nil
	})
	c := offlineCluster("limited", "limited.example.com", nil, provider("p", "custom", nil))
	for _, tc := range []struct {
		qps              float32
		burst            int
		wantQPS          float32
		wantBurst        int
		wantRateLimiting bool
	}{
		{0, 0, -1, 0, false},
		{-5, 10, -1, 0, false},
		{20, 0, 20, 40, true},
		{0.2, 0, 0.2, 1, true},
		{20, 5, 20, 5, true},
	} {
		r, err := NewResolver(ResolverOptions{QPS: tc.qps, Burst: tc.burst, ClientIP: testClientIP, Providers: map[string]Provider{"custom": token}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := r.Resolve(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rest.RESTClientFor(withCodec(a.Config))
		if err != nil {
			t.Fatal(err)
		}
		if a.Config.QPS != tc.wantQPS || a.Config.Burst != tc.wantBurst || (rc.GetRateLimiter() != nil) != tc.wantRateLimiting {
			t.Errorf("QPS %v, Burst %d: config has %v and %d, rate limiter %v", tc.qps, tc.burst, a.Config.QPS, a.Config.Burst, rc.GetRateLimiter())
		}
	}
}

// withCodec is a copy of cfg that rest.RESTClientFor accepts.
func withCodec(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}
