package fleettest

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

// RedirectingToken is the token of the Cluster that RedirectingMember registers: it must never
// reach the server the member redirects to.
const RedirectingToken = "pinned-token-that-must-stay-home"

// Redirector is a hostile member: whatever is asked of it, it answers with a redirect to a
// server of the attacker's, which records every request it hears.
type Redirector struct {
	asked atomic.Int64
	mu    sync.Mutex
	heard []string
}

// RedirectingMember registers, in the cluster set ns, a Cluster named name whose server (with
// a CA the Cluster trusts, and a token Secret pinned to that server) redirects every request to
// the attacker's server. The servers stop when the test ends.
func RedirectingMember(tb testing.TB, lf *localfleet.Fleet, ns, name string) *Redirector {
	tb.Helper()
	r := &Redirector{}
	catcher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.heard = append(r.heard, req.URL.String()+" Authorization="+req.Header.Get("Authorization"))
		r.mu.Unlock()
	}))
	tb.Cleanup(catcher.Close)
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.asked.Add(1)
		http.Redirect(w, req, catcher.URL+req.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	tb.Cleanup(hostile.Close)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hostile.Certificate().Raw})

	RegisterServer(tb, lf, ns, name, hostile.URL, ca, RedirectingToken)
	return r
}

// RegisterServer registers, in the cluster set ns, a Cluster named name whose server is server,
// trusted with the CA caPEM, and whose credential is token in a Secret pinned to that server.
func RegisterServer(tb testing.TB, lf *localfleet.Fleet, ns, name, server string, caPEM []byte, token string) {
	tb.Helper()
	ctx := Context(tb, time.Minute)
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-token", Annotations: map[string]string{v1alpha1.ServersAnnotation: server}},
		Data:       map[string][]byte{v1alpha1.SecretTokenKey: []byte(token)},
	}, metav1.CreateOptions{})
	require.NoError(tb, err)
	_, err = versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns).Create(ctx, &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}},
				CABundle:        caPEM,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token",
				Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": name + "-token"}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(tb, err)
}

// Asked is how many requests the hostile member was sent, and answered with a redirect.
func (r *Redirector) Asked() int64 { return r.asked.Load() }

// Heard is every request the attacker's server heard: its URL and Authorization header.
func (r *Redirector) Heard() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.heard)
}
