package rotation_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// dueToken is a token as a member's API server issues one, bound to a Secret, of a 10-minute
// life that began now; its signature is nobody's.
func dueToken(t *testing.T, secret string) string {
	t.Helper()
	now := time.Now()
	claims, err := json.Marshal(map[string]any{"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		"kubernetes.io": map[string]any{"secret": map[string]string{"name": secret}}})
	require.NoError(t, err)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(claims) + "." + enc([]byte("signature"))
}

// registerHostile stores, in the set ns, a Cluster named name at server's address, with a Secret
// pinned to it and holding token, as join would have written them; it returns its Member.
func registerHostile(t *testing.T, ns, name string, server *httptest.Server, token string) *multicluster.Member {
	t.Helper()
	ctx := context.Background()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-token", Annotations: map[string]string{
			v1alpha1.ServersAnnotation: server.URL, v1alpha1.ServiceAccountAnnotation: name + "/" + name}},
		Data: map[string][]byte{"token": []byte(token), "ca.crt": ca},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	c, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns).Create(ctx, &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server.URL}}},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token",
				Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": name + "-token"}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)), ClientIP: netip.MustParseAddr("127.0.0.1")})
	require.NoError(t, err)
	return multicluster.MembersOf(resolver, []v1alpha1.Cluster{*c}, multicluster.FleetOptions{})[0]
}

// Whoever answers at a member's address can neither stall the Rotator nor exhaust its memory: a
// member that never answers is given up after Options.Timeout, one that answers without end is
// read no further than 1 MiB, and a real member in the same pass, behind both with one renewal
// at a time, is renewed. The errors name the members and carry no token.
func TestHostileMembersHoldBackNoOther(t *testing.T) {
	realservers.Required(t)
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	silent := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // after the body, the server notices the client hang up
		<-r.Context().Done()
	}))
	defer silent.Close()
	var written atomic.Int64
	endless := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		chunk := []byte(`{"kind":"Secret","apiVersion":"v1","metadata":{"name":"` + strings.Repeat("x", 4000) + `"}}`)
		for {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return // the Rotator hung up
			}
		}
	}))
	defer endless.Close()

	ns := fleettest.CopySet(t, lf)
	real := registerAs(t, ns, "beside-hostile/beside-hostile", boundRenewer(t, lf.Members[0], "beside-hostile"))[0]
	silentToken, endlessToken := dueToken(t, "token-binding-silent"), dueToken(t, "token-binding-endless")
	members := []*multicluster.Member{
		registerHostile(t, ns, "silent", silent, silentToken),
		registerHostile(t, ns, "endless", endless, endlessToken),
		real,
	}
	const timeout = 2 * time.Second
	r, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config),
		Concurrency: 1, Timeout: timeout})
	require.NoError(t, err)

	var renewed []rotation.Renewal
	var errs []error
	pass := make(chan struct{})
	go func() {
		defer close(pass)
		renewed, errs = rotation.RenewDueAt(r, context.Background(), time.Now().Add(7*time.Minute))
	}()
	select {
	case <-pass:
	case <-time.After(timeout + 20*time.Second):
		t.Fatal("the pass is still waiting on the silent member, past its timeout")
	}
	require.Len(t, renewed, 1, "errors: %v", errs)
	require.Equal(t, real.Name(), renewed[0].Member)
	require.Len(t, errs, 2)
	byMember := map[string]string{}
	for _, err := range errs {
		msg := err.Error()
		require.NotContains(t, msg, silentToken)
		require.NotContains(t, msg, endlessToken)
		for _, name := range []string{"silent", "endless"} {
			if strings.HasPrefix(msg, "member "+ns+"/"+name+", ") {
				byMember[name] = msg
			}
		}
	}
	require.Contains(t, byMember["silent"], "the member did not answer within 2s")
	require.Contains(t, byMember["endless"], "the answer exceeds 1024 KiB")
	require.Less(t, written.Load(), int64(64<<20), "the endless member was read on")
	for _, name := range []string{"silent", "endless"} {
		s, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Get(context.Background(), name+"-token", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, map[string]string{"silent": silentToken, "endless": endlessToken}[name], string(s.Data["token"]))
	}
	silent.CloseClientConnections()
	endless.CloseClientConnections()
}
