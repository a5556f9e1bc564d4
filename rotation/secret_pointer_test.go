package rotation_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// A Cluster whose secret provider names another namespace's Secret (config.namespace) is renewed
// from that Secret, the one its resolution reads and pins, never from a Secret of the same name
// in the Cluster's own namespace: the rotator read that one, and sent its token (a credential
// pinned to another server) to the member's server. Where the Resolver does not allow the other
// namespace, nothing is read or sent at all.
func TestRenewalFollowsTheProvidersSecretNamespace(t *testing.T) {
	realservers.Required(t)
	ctx := context.Background()
	var mu sync.Mutex
	var sent []string // the bearer tokens the member's server was sent
	member := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		mu.Unlock()
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
	}))
	defer member.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: member.Certificate().Raw})

	set, credentials := fleettest.NewSet(t, lf), fleettest.NewSet(t, lf)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	theirs, ours := dueToken(t, "theirs"), dueToken(t, "ours")
	secret := func(ns, server, token string) {
		_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{
				v1alpha1.ServersAnnotation: server, v1alpha1.ServiceAccountAnnotation: "sa/sa"}},
			Data: map[string][]byte{"token": []byte(token), "ca.crt": ca},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	secret(credentials, member.URL, ours)                 // the Secret the Cluster points at, pinned to the member
	secret(set, "https://elsewhere.example:6443", theirs) // same name, the Cluster's own set, pinned elsewhere
	cluster := v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: set, Name: "pointer"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: member.URL}}},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token",
				Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": "x", "namespace": credentials}}}},
		},
	}
	pass := func(allowed ...string) []error {
		resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kube),
			ClientIP: netip.MustParseAddr("127.0.0.1"), SecretNamespaces: allowed})
		require.NoError(t, err)
		members := multicluster.MembersOf(resolver, []v1alpha1.Cluster{cluster}, multicluster.FleetOptions{})
		r, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: kube, Timeout: 5 * time.Second})
		require.NoError(t, err)
		_, errs := rotation.RenewDueAt(r, ctx, time.Now().Add(7*time.Minute))
		return errs
	}

	// Not allowed: the resolution refuses, and nothing reaches the member.
	errs := pass()
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), "outside the cluster's namespace")
	mu.Lock()
	require.Empty(t, sent, "a token was sent though the Resolver does not follow the pointer")
	mu.Unlock()

	// Allowed: the renewal goes to the member with the token of the Secret pointed at.
	errs = pass(credentials)
	require.Len(t, errs, 1, "the member refuses the renewal")
	require.Contains(t, errs[0].Error(), "Secret "+credentials+"/x")
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, sent)
	for _, token := range sent {
		require.NotEqual(t, theirs, token, "the token of the Cluster's own set's Secret, pinned elsewhere, went to the member")
		require.Equal(t, ours, token)
	}
	for _, err := range errs {
		require.NotContains(t, err.Error(), ours)
		require.NotContains(t, err.Error(), theirs)
	}
}

// The rotator reads the token's Secret again after resolving the member (the Resolver keeps a
// resolution up to 30 s): a Secret pinned elsewhere since is refused, and its token is not sent
// to the server the old pinning allowed.
func TestRenewalRefusesASecretPinnedElsewhereSinceResolving(t *testing.T) {
	realservers.Required(t)
	ctx := context.Background()
	var mu sync.Mutex
	var sent []string
	member := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent = append(sent, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		mu.Unlock()
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
	}))
	defer member.Close()
	set := fleettest.NewSet(t, lf)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	m := registerHostile(t, set, "moved", member, dueToken(t, "moved"))
	_, err := m.Access(ctx) // resolved now, while the Secret is pinned to the member
	require.NoError(t, err)

	// The Secret now holds another credential, pinned to another server.
	elsewhere := dueToken(t, "elsewhere")
	s, err := kube.CoreV1().Secrets(set).Get(ctx, "moved-token", metav1.GetOptions{})
	require.NoError(t, err)
	s.Annotations[v1alpha1.ServersAnnotation] = "https://elsewhere.example:6443"
	s.Data["token"] = []byte(elsewhere)
	_, err = kube.CoreV1().Secrets(set).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)

	r, err := rotation.New(fleettest.Fixed([]*multicluster.Member{m}), rotation.Options{Kube: kube, Timeout: 5 * time.Second})
	require.NoError(t, err)
	_, errs := rotation.RenewDueAt(r, ctx, time.Now().Add(7*time.Minute))
	require.Len(t, errs, 1)
	var pinning *access.PinningError
	require.ErrorAs(t, errs[0], &pinning)
	require.NotContains(t, errs[0].Error(), elsewhere)
	mu.Lock()
	defer mu.Unlock()
	require.NotContains(t, sent, elsewhere, "a token pinned elsewhere went to the member's server")
}
