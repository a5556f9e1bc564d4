package execcredential_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/execcredential"
	"github.com/cluster-registry/sdk/testkit/testcerts"
)

const server = "https://member.example.com:6443"

// caPEM is the Cluster's CA bundle, made once.
var caPEM = testcerts.CAPEM()

// resolved is what the SDK resolves for a Cluster at server whose Secret, pinned to it, holds
// token: no server is reached.
func resolved(t *testing.T, token string) *access.Resolved {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "m-token", Annotations: map[string]string{v1alpha1.ServersAnnotation: server}},
		Data: map[string][]byte{v1alpha1.SecretTokenKey: []byte(token)}}
	r, err := access.NewResolver(access.ResolverOptions{ClientIP: netip.MustParseAddr("127.0.0.1"),
		Secrets: access.SecretGetterFunc(func(_ context.Context, ns, name string) (*corev1.Secret, error) {
			require.Equal(t, "fleet/m-token", ns+"/"+name)
			return secret, nil
		})})
	require.NoError(t, err)
	c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "m"}, Spec: v1alpha1.ClusterSpec{
		KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{CABundle: caPEM,
			ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}}},
		AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret},
			Config: map[string]string{"name": "m-token"}}}},
	}}
	a, err := r.Resolve(t.Context(), c)
	require.NoError(t, err)
	return a
}

func request(t *testing.T, cluster *clientauthv1.Cluster) *clientauthv1.ExecCredential {
	info, err := json.Marshal(clientauthv1.ExecCredential{TypeMeta: metav1.TypeMeta{APIVersion: "client.authentication.k8s.io/v1", Kind: "ExecCredential"},
		Spec: clientauthv1.ExecCredentialSpec{Cluster: cluster}})
	require.NoError(t, err)
	req, err := execcredential.ParseRequest(info)
	require.NoError(t, err)
	return req
}

// The answer is the resolved token, for at most MaxLifetime (sooner when the token expires
// sooner), given only to a client that will call the resolved server and verify it by the same
// CA and name; every other request is refused, saying why, with no token in the error.
func TestAnswer(t *testing.T) {
	exp := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	claims, _ := json.Marshal(map[string]any{"exp": exp.Unix()})
	token := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + base64.RawURLEncoding.EncodeToString(claims) + ".sig"
	a := resolved(t, token)
	good := clientauthv1.Cluster{Server: server, CertificateAuthorityData: caPEM}

	answer, err := execcredential.Answer(t.Context(), request(t, &good), a)
	require.NoError(t, err)
	require.Equal(t, "ExecCredential", answer.Kind)
	require.Equal(t, token, answer.Status.Token)
	require.Equal(t, exp, answer.Status.ExpirationTimestamp.Time.Local(), "the token's own expiry, before MaxLifetime")

	for name, to := range map[string]clientauthv1.Cluster{
		"another server":  {Server: "https://attacker.example.com:6443", CertificateAuthorityData: caPEM},
		"user info":       {Server: "https://user:pass@attacker.example.com", CertificateAuthorityData: caPEM},
		"no verification": {Server: server, InsecureSkipTLSVerify: true},
		"another CA":      {Server: server, CertificateAuthorityData: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")},
		"another name":    {Server: server, CertificateAuthorityData: caPEM, TLSServerName: "attacker.example.com"},
	} {
		_, err := execcredential.Answer(t.Context(), request(t, &to), a)
		var refused *execcredential.TargetError
		require.True(t, errors.As(err, &refused), "%s: %v", name, err)
		require.NotContains(t, err.Error(), token, name)
		require.NotContains(t, err.Error(), "pass", "%s: the address's user info is repeated", name)
	}

	_, err = execcredential.ParseRequest([]byte(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","spec":{}}`))
	require.ErrorIs(t, err, execcredential.ErrNoClusterInfo)
	_, err = execcredential.ParseRequest([]byte(`{"apiVersion":"client.authentication.k8s.io/v2","kind":"ExecCredential","spec":{}}`))
	require.ErrorContains(t, err, `apiVersion "client.authentication.k8s.io/v2"`)
}
