package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
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
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	certPEM, keyPEM := testcerts.ClientCertPEM("cert-reader")
	caFile := filepath.Join(t.TempDir(), "client-ca.pem")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600)) // the certificate is its own CA
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).RbacV1().RoleBindings(lf.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "cert-reader"},
		RoleRef:    clusterRole(t, lf.Namespace, "clusters-cert-reader", "get", "list"),
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cert-reader"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	out, w := io.Pipe()
	done := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace, "--listen", "127.0.0.1:0",
			"--self-signed", "--client-ca-file", caFile}, w, &stderr)
		w.Close()
	}()
	var url, servingCert string
	for lines := bufio.NewScanner(out); lines.Scan(); {
		if _, path, ok := strings.Cut(lines.Text(), "self-signed certificate (trust it in clients, e.g. curl --cacert): "); ok {
			servingCert = path
		}
		if _, addr, ok := strings.Cut(lines.Text(), " members on "); ok {
			url = addr
			break
		}
	}
	require.True(t, strings.HasPrefix(url, "https://"), "url %q; stderr: %s", url, stderr.String())
	go func() { _, _ = io.Copy(io.Discard, out) }()
	roots := x509.NewCertPool()
	pemData, err := os.ReadFile(servingCert)
	require.NoError(t, err)
	require.True(t, roots.AppendCertsFromPEM(pemData))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
	}
	get := func(c *http.Client) (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/clusters", nil)
		require.NoError(t, err)
		resp, err := c.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}

	code, body := get(client(pair))
	require.Equal(t, http.StatusOK, code, string(body))
	var list clusterList
	require.NoError(t, json.Unmarshal(body, &list))
	require.Len(t, list.Clusters, len(lf.Members), "the certificate's user may list the set's Clusters")

	code, body = get(client())
	require.Equal(t, http.StatusUnauthorized, code, string(body))
	other, otherKey := testcerts.ClientCertPEM("cert-reader") // same name, a CA fleet-api does not trust
	stranger, err := tls.X509KeyPair(other, otherKey)
	require.NoError(t, err)
	code, body = get(client(stranger))
	require.Equal(t, http.StatusUnauthorized, code, "a certificate no trusted CA signed: %s", body)

	cancel()
	require.Equal(t, 0, <-done, stderr.String())
}
