package health

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// fakeAPIServer answers the probe's paths as handlers say; a nil handler is a 404.
func fakeAPIServer(t *testing.T, readyz, healthz http.HandlerFunc) *multicluster.Member {
	m, _ := fakeAPIServerWithServer(t, readyz, healthz, false, nil)
	return m
}

// fakeAPIServerWithServer is fakeAPIServer, and its server; with h2 it serves HTTP/2 over TLS, as
// API servers do. connState, if not nil, hears of each connection's states.
func fakeAPIServerWithServer(t *testing.T, readyz, healthz http.HandlerFunc, h2 bool, connState func(net.Conn, http.ConnState)) (*multicluster.Member, *httptest.Server) {
	mux := http.NewServeMux()
	if readyz != nil {
		mux.HandleFunc("/readyz", readyz)
	}
	if healthz != nil {
		mux.HandleFunc("/healthz", healthz)
	}
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"major":"1","minor":"20","gitVersion":"v1.20.0"}`))
	})
	mux.HandleFunc("/api/v1/namespaces/kube-system", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"uid-old"}}`))
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnState = connState
	cfg := &rest.Config{}
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
		cfg.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	cfg.Host = srv.URL
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "old"}}
	return multicluster.NewMember(c, multicluster.Clients{Config: cfg, Kubernetes: kubernetes.NewForConfigOrDie(cfg)}), srv
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func TestProbe(t *testing.T) {
	c := &Controller{opts: Options{Timeout: 5 * time.Second}}
	for _, tc := range []struct {
		name            string
		readyz, healthz http.HandlerFunc
		want            observation
	}{
		{"ready", ok, nil, observation{resolved: true, ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered", version: "v1.20.0", clusterID: "uid-old", opened: true, identified: true}},
		{"an API server without /readyz is asked /healthz", nil, ok,
			observation{resolved: true, ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered", version: "v1.20.0", clusterID: "uid-old", opened: true, identified: true}},
		{"failing checks are named", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("[+]ping ok\n[-]etcd failed: reason withheld\n[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed\n"))
		}, nil, observation{resolved: true, reason: v1alpha1.ReasonNotReady, message: "failing checks: etcd, poststarthook/rbac/bootstrap-roles", opened: true}},
		{"an API server whose post-start hooks still run is starting, not failed", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("[+]ping ok\n[+]etcd ok\n[-]informer-sync failed: reason withheld\n[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed\n"))
		}, nil, observation{resolved: true, reason: v1alpha1.ReasonStarting, message: "starting: waiting for informer-sync, poststarthook/rbac/bootstrap-roles", opened: true}},
		{"a restarted API server's first answer: its storage client connecting, its hooks running", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("[+]ping ok\n[-]etcd-readiness failed: reason withheld\n[-]informer-sync failed: reason withheld\n[-]autoregister-completion failed: reason withheld\n[-]poststarthook/crd-informer-synced failed: not finished\nreadyz check failed\n"))
		}, nil, observation{resolved: true, reason: v1alpha1.ReasonStarting, message: "starting: waiting for etcd-readiness, informer-sync, autoregister-completion, poststarthook/crd-informer-synced", opened: true}},
		{"storage failing once started is not starting", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("[+]ping ok\n[-]etcd failed: reason withheld\n[-]etcd-readiness failed: reason withheld\nreadyz check failed\n"))
		}, nil, observation{resolved: true, reason: v1alpha1.ReasonNotReady, message: "failing checks: etcd, etcd-readiness", opened: true}},
		{"401", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }, nil,
			observation{resolved: true, reason: v1alpha1.ReasonUnauthorized, message: "the API server refused the credentials (401)", opened: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.probe(context.Background(), fakeAPIServer(t, tc.readyz, tc.healthz), false)
			require.Equal(t, tc.want, got)
		})
	}

	// A black hole: the connection is made, no answer comes.
	hang := make(chan struct{})
	defer close(hang)
	c.opts.Timeout = 200 * time.Millisecond
	got := c.probe(context.Background(), fakeAPIServer(t, func(http.ResponseWriter, *http.Request) { <-hang }, nil), false)
	require.Equal(t, observation{resolved: true, reason: v1alpha1.ReasonUnreachable, message: "no answer within 200ms", opened: true}, got)
}

// With KeepConnections a probe over a connection already open reads /readyz only: the server at
// the other end is the one whose version and identity the connection's first probe read. A new
// connection, or identify (the heartbeat), reads them again.
func TestProbeIdentifiesOnNewConnections(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			c := &Controller{opts: Options{Timeout: 5 * time.Second, KeepConnections: true}}
			var mu sync.Mutex
			var requests []string
			seen := func() []string {
				mu.Lock()
				defer mu.Unlock()
				r := requests
				requests = nil
				return r
			}
			m, srv := fakeAPIServerWithServer(t, ok, nil, h2, nil)
			inner := srv.Config.Handler
			var fresh atomic.Bool // a server just started: no kube-system yet
			srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests = append(requests, r.URL.Path)
				mu.Unlock()
				if fresh.Load() && r.URL.Path == "/api/v1/namespaces/kube-system" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
					return
				}
				inner.ServeHTTP(w, r)
			})
			identified := observation{resolved: true, ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered", version: "v1.20.0", clusterID: "uid-old", opened: true, identified: true}
			ctx := context.Background()
			all := []string{"/readyz", "/version", "/api/v1/namespaces/kube-system"}

			require.Equal(t, identified, c.probe(ctx, m, false), "the first probe opens the connection")
			require.Equal(t, all, seen())

			built, ok := c.keptClients.Load(m)
			require.True(t, ok, "no client kept for the member")
			require.Equal(t, observation{resolved: true, ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered"}, c.probe(ctx, m, false),
				"a probe over the open connection")
			require.Equal(t, []string{"/readyz"}, seen())
			again, _ := c.keptClients.Load(m)
			require.Same(t, built, again, "the member's client was built again for a probe")

			reidentified := identified
			reidentified.opened = false
			require.Equal(t, reidentified, c.probe(ctx, m, true), "identify (the heartbeat) reads them over an open connection too")
			require.Equal(t, all, seen())

			srv.CloseClientConnections()
			require.Equal(t, identified, c.probe(ctx, m, false), "a new connection may reach another server")
			require.Equal(t, all, seen())

			// A new connection to a server that cannot tell its identity yet is not identified:
			// the controller asks again over it (see TestTrackedIdentify).
			fresh.Store(true)
			srv.CloseClientConnections()
			require.Equal(t, observation{resolved: true, ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered", version: "v1.20.0", opened: true},
				c.probe(ctx, m, false))
			require.Equal(t, all, seen())
		})
	}
}

// The controller asks a probe to identify the member until a probe has identified the connection
// it opened, and once a heartbeat.
func TestTrackedIdentify(t *testing.T) {
	const heartbeat = time.Minute
	t0 := time.Now()
	var m tracked
	require.True(t, m.identify(t0, heartbeat), "never identified")

	m.observed(observation{resolved: true, opened: true, identified: true}, t0)
	require.False(t, m.identify(t0.Add(time.Second), heartbeat), "identified, over a connection kept since")

	m.observed(observation{resolved: true, opened: true}, t0.Add(2*time.Second)) // a new connection, say 404 on kube-system
	require.True(t, m.identify(t0.Add(3*time.Second), heartbeat), "a new connection not yet identified")
	m.observed(observation{}, t0.Add(3*time.Second)) // a failed probe over it identifies nothing
	require.True(t, m.identify(t0.Add(4*time.Second), heartbeat), "still not identified")

	m.observed(observation{resolved: true, identified: true}, t0.Add(4*time.Second))
	require.False(t, m.identify(t0.Add(5*time.Second), heartbeat))
	require.True(t, m.identify(t0.Add(4*time.Second+heartbeat), heartbeat), "the heartbeat identifies again")
}

// hostileAPIServer answers with a 5,000-character gitVersion and kube-system UID, and, while
// failing is set, a readyz answer naming 10,000 failing checks ("check-N-é").
func hostileAPIServer(failing *atomic.Bool) http.Handler {
	long := strings.Repeat("x", 5000)
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !failing.Load() {
			_, _ = w.Write([]byte("ok"))
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
		for i := range 10000 {
			fmt.Fprintf(w, "[-]check-%d-é failed: reason withheld\n", i)
		}
	})
	mux.HandleFunc("/version", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, `{"major":"1","minor":"36","gitVersion":"v1.36.3-%s"}`, long)
	})
	mux.HandleFunc("/api/v1/namespaces/kube-system", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"%s"}}`, long)
	})
	return mux
}

// Whoever answers at a Cluster's endpoint chooses what a probe reads. What it reports must still
// fit the status schema (version at most 64 characters, clusterID 128, a condition's message
// bounded), or every status write would fail and the status would stand stale.
func TestProbeBoundsWhatTheMemberReports(t *testing.T) {
	var failing atomic.Bool
	mux := hostileAPIServer(&failing)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	m := multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "hostile"}},
		multicluster.Clients{Config: cfg, Kubernetes: kubernetes.NewForConfigOrDie(cfg)})
	c := &Controller{opts: Options{Timeout: 5 * time.Second}}

	got := c.probe(context.Background(), m, true)
	require.Equal(t, observation{resolved: true, ready: true, reason: v1alpha1.ReasonReachable, message: "readyz answered", opened: true, identified: true}, got,
		"a version and identity no API server would report are taken as not reported")

	failing.Store(true)
	got = c.probe(context.Background(), m, true)
	require.Equal(t, v1alpha1.ReasonNotReady, got.reason)
	require.LessOrEqual(t, len(got.message), 512)
	require.True(t, utf8.ValidString(got.message), "cut inside a character: %q", got.message[len(got.message)-8:])
	require.True(t, strings.HasPrefix(got.message, "failing checks: check-0-é, check-1-é, "), got.message)
}

func FuzzFailingChecks(f *testing.F) {
	f.Add([]byte("[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n"))
	f.Add([]byte(strings.Repeat("[-]ééééééééé\n", 100)))
	f.Add([]byte("[-]\x1b[2J\x1b]52;c;ZXZpbA==\x07\u009b1A\rcleared failed\n[-]\xff\xfe failed\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		got := checksMessage("failing checks: ", failedChecks(body))
		if len(got) > 512 {
			t.Fatalf("%d bytes", len(got))
		}
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 out: %q", got)
		}
		if i := strings.IndexFunc(got, func(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }); i >= 0 {
			t.Fatalf("not printable at %d: %q", i, got)
		}
	})
}

func TestReportedVersionAndUID(t *testing.T) {
	for v, want := range map[string]string{
		"v1.36.3": "v1.36.3", "v1.33.1-eks-1b2c3d4": "v1.33.1-eks-1b2c3d4", "v1.30.0+k3s1": "v1.30.0+k3s1",
		"": "", "v1.36.3 <script>": "", "v1\n": "", strings.Repeat("1", 65): "",
	} {
		require.Equal(t, want, reportedVersion(v), "%q", v)
	}
	for uid, want := range map[string]string{
		"3a8e9b2c-0d1e-4f5a-8b7c-6d5e4f3a2b1c": "3a8e9b2c-0d1e-4f5a-8b7c-6d5e4f3a2b1c",
		"":                                     "", "a b": "", "../x": "", strings.Repeat("a", 129): "",
	} {
		require.Equal(t, want, reportedUID(uid), "%q", uid)
	}
}

// client-go reads an answer whole into memory. A member that answers readyz without end must not
// exhaust the controller's memory: the probe stops reading at maxProbeAnswer, in both modes.
func TestProbeStopsReadingAnEndlessAnswer(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run(fmt.Sprintf("KeepConnections=%v", keep), func(t *testing.T) {
			endless := func(w http.ResponseWriter, _ *http.Request) {
				chunk := []byte(strings.Repeat("[+]ping ok\n", 1000))
				for {
					if _, err := w.Write(chunk); err != nil {
						return // the probe hung up
					}
				}
			}
			m, _ := fakeAPIServerWithServer(t, endless, nil, true, nil)
			c := &Controller{opts: Options{Timeout: 30 * time.Second, KeepConnections: keep}}
			got := c.probe(context.Background(), m, false)
			require.Equal(t, observation{resolved: true, reason: v1alpha1.ReasonNotReady, message: "the API server's answer exceeds 1024 KiB, more than any API server's", opened: true}, got)
		})
	}
}

// By default a probe's connection is its own and is closed when the probe is done, so that an
// idle member holds no connection and no goroutine. A wrapper that hid the transport from
// CloseIdleConnectionsFor once left every probe's connection open.
func TestProbeClosesItsConnection(t *testing.T) {
	var open atomic.Int64
	m, _ := fakeAPIServerWithServer(t, ok, nil, true, func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	})
	c := &Controller{opts: Options{Timeout: 5 * time.Second}}
	for range 3 {
		require.True(t, c.probe(context.Background(), m, false).ready)
	}
	require.Eventually(t, func() bool { return open.Load() == 0 }, 5*time.Second, 10*time.Millisecond,
		"%d connections left open after the probes", open.Load())
}

// A member's readyz answer that redirects elsewhere must not take the probe's credentials with it,
// in either connection mode: the Resolver's transport refuses, and the member is Unreachable with
// a message that says why. The targets are a plain http listener and another https server that
// the member's CA vouches for; neither may see a request or a handshake.
func TestProbeDoesNotFollowRedirectsElsewhere(t *testing.T) {
	const token = "probe-token-that-must-stay-home"
	var target atomic.Value
	member := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.Load().(string)+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer member.Close()
	var seen atomic.Int32
	record := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { seen.Add(1) })
	plain := httptest.NewServer(record)
	defer plain.Close()
	other := httptest.NewUnstartedServer(record)
	other.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		seen.Add(1)
		return nil, nil
	}}
	other.StartTLS()
	defer other.Close()

	resolver, err := access.NewResolver(access.ResolverOptions{
		ClientIP: netip.MustParseAddr("127.0.0.1"),
		Providers: map[string]access.Provider{"static": access.ProviderFunc(
			func(context.Context, *access.Request) (*access.Credentials, error) {
				return &access.Credentials{BearerToken: token}, nil
			})},
	})
	require.NoError(t, err)
	m := multicluster.MembersOf(resolver, []v1alpha1.Cluster{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "redirecting"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: member.URL}},
				CABundle:        pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: member.Certificate().Raw}),
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "p", Type: v1alpha1.AuthProviderType{Name: "static"}}}},
		},
	}}, multicluster.FleetOptions{})[0]

	for _, keep := range []bool{false, true} {
		for _, to := range []*httptest.Server{plain, other} {
			t.Run(fmt.Sprintf("KeepConnections=%v to %s", keep, to.URL), func(t *testing.T) {
				target.Store(to.URL)
				c := &Controller{opts: Options{Timeout: 5 * time.Second, KeepConnections: keep}}
				got := c.probe(context.Background(), m, true)
				require.False(t, got.ready)
				require.Equal(t, v1alpha1.ReasonUnreachable, got.reason)
				require.Contains(t, got.message, "refused to follow a 307 redirect from "+member.URL+" to "+to.URL)
				require.NotContains(t, got.message, token)
				require.Zero(t, seen.Load(), "the redirect's target heard from the probe")
			})
		}
	}
}
