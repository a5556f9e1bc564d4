package health

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// fakeAPIServer answers the probe's paths as handlers say; a nil handler is a 404.
func fakeAPIServer(t *testing.T, readyz, healthz http.HandlerFunc) *multicluster.Member {
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
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "old"}}
	return multicluster.NewMember(c, multicluster.Clients{Config: &rest.Config{Host: srv.URL}})
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func TestProbe(t *testing.T) {
	c := &Controller{opts: Options{Timeout: 5 * time.Second}}
	for _, tc := range []struct {
		name            string
		readyz, healthz http.HandlerFunc
		want            observation
	}{
		{"ready", ok, nil, observation{ready: true, reason: v1alpha1.ReasonReachable, message: "readyz and version answered", version: "v1.20.0", clusterID: "uid-old"}},
		{"an API server without /readyz is asked /healthz", nil, ok,
			observation{ready: true, reason: v1alpha1.ReasonReachable, message: "readyz and version answered", version: "v1.20.0", clusterID: "uid-old"}},
		{"failing checks are named", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("[+]ping ok\n[-]etcd failed: reason withheld\n[-]poststarthook/rbac/bootstrap-roles failed: not finished\nreadyz check failed\n"))
		}, nil, observation{reason: v1alpha1.ReasonNotReady, message: "failing checks: etcd, poststarthook/rbac/bootstrap-roles"}},
		{"401", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusUnauthorized) }, nil,
			observation{reason: v1alpha1.ReasonUnauthorized, message: "the API server refused the credentials (401)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.probe(context.Background(), fakeAPIServer(t, tc.readyz, tc.healthz))
			require.Equal(t, tc.want, got)
		})
	}

	// A black hole: the connection is made, no answer comes.
	hang := make(chan struct{})
	defer close(hang)
	c.opts.Timeout = 200 * time.Millisecond
	got := c.probe(context.Background(), fakeAPIServer(t, func(http.ResponseWriter, *http.Request) { <-hang }, nil))
	require.Equal(t, observation{reason: v1alpha1.ReasonUnreachable, message: "no answer within 200ms"}, got)
}
