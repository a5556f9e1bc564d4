package main

import (
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// With TLS (here --self-signed) and --client-ca-file, a caller may authenticate with a client
// certificate, as with the registry's own x509 authentication: its common name is the user, and
// RBAC on that user decides. A caller with neither certificate nor token is still nobody.
func TestTLSWithClientCertificates(t *testing.T) {
	needsFleet(t)
	ctx := testContext(t)
	certPEM, keyPEM := testcerts.ClientCertPEM("cert-reader")
	caFile := filepath.Join(t.TempDir(), "client-ca.pem")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600)) // the certificate is its own CA
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).RbacV1().RoleBindings(lf.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cert-reader"},
		RoleRef:    clusterRole(t, lf.Namespace, "clusters-cert-reader", "get", "list"),
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cert-reader"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	api := runFleetAPI(t, ctx, "--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace, "--listen", "127.0.0.1:0",
		"--self-signed", "--client-ca-file", caFile)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	get := func(certs ...tls.Certificate) (int, []byte) {
		return api.call(t, "", certs, http.MethodGet, "/clusters", nil)
	}

	code, body := get(pair)
	require.Equal(t, http.StatusOK, code, string(body))
	var list clusterList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Clusters, len(lf.Members), "the certificate's user may list the set's Clusters")

	code, body = get()
	require.Equal(t, http.StatusUnauthorized, code, string(body))
	other, otherKey := testcerts.ClientCertPEM("cert-reader") // same name, a CA fleet-api does not trust
	stranger, err := tls.X509KeyPair(other, otherKey)
	require.NoError(t, err)
	code, body = get(stranger)
	require.Equal(t, http.StatusUnauthorized, code, "a certificate no trusted CA signed: %s", body)
}
