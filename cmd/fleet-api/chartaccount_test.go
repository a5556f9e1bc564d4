package main

import (
	"bufio"
	"bytes"
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
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// fleet-api run as the chart runs it: its own service account, bound to the ClusterRole that
// deploy/fleet-api/clusterrole.yaml ships (the chart's, deploy/chart_test.go checks), with the
// Deployment's flags (TLS, a client CA), acts for each kind of caller the registry knows: a
// service account's bound token (which carries the extra authentication.kubernetes.io/credential-id,
// and, bound to a Pod, the Pod's name and UID), and a client certificate (no extras). An editor's
// writes and reads as themselves succeed; a viewer's write is still refused. Before the role
// granted the extras' keys, every call that impersonates answered 403 for a token's caller.
func TestAsTheChartsServiceAccount(t *testing.T) {
	needsFleet(t)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	kubeconfig := chartAccountKubeconfig(t, ctx, kube)

	editRole := clusterRole(t, lf.Namespace, "clusters-chart-editor", "get", "list", "watch", "update", "patch")
	releases := rbacv1.PolicyRule{APIGroups: []string{"clusterregistry.k8s.io"}, Resources: []string{"releases", "releasestatusslices"}, Verbs: []string{"get", "list", "watch"}}
	_, err := kube.RbacV1().Roles(lf.Namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "releases-chart-reader"}, Rules: []rbacv1.PolicyRule{releases}}, metav1.CreateOptions{})
	require.NoError(t, err)
	editor, err := caller(ctx, "chart-editor", editRole, lf.Namespace)
	require.NoError(t, err)
	bindIn(t, ctx, kube, lf.Namespace, "releases-chart-reader", rbacv1.Subject{Kind: "ServiceAccount", Name: "chart-editor", Namespace: callers})
	podToken := podBoundToken(t, ctx, kube, "chart-editor")
	viewer, err := caller(ctx, "chart-viewer", clusterRole(t, lf.Namespace, "clusters-chart-viewer", "get", "list", "watch"), lf.Namespace)
	require.NoError(t, err)
	certPEM, keyPEM := testcerts.ClientCertPEM("chart-cert-editor")
	caFile := filepath.Join(t.TempDir(), "client-ca.pem")
	require.NoError(t, os.WriteFile(caFile, certPEM, 0o600)) // the certificate is its own CA
	bindIn(t, ctx, kube, lf.Namespace, editRole.Name, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "chart-cert-editor"})
	bindIn(t, ctx, kube, lf.Namespace, "releases-chart-reader", rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "chart-cert-editor"})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)

	api := runFleetAPI(t, ctx, "--kubeconfig", kubeconfig, "-n", lf.Namespace, "--listen", "127.0.0.1:0", "--self-signed", "--client-ca-file", caFile)
	for _, who := range []struct {
		name  string
		token string
		cert  []tls.Certificate
	}{{"a bound token", editor, nil}, {"a Pod's bound token", podToken, nil}, {"a client certificate", "", []tls.Certificate{pair}}} {
		t.Run(who.name, func(t *testing.T) {
			code, body := api.call(t, who.token, who.cert, http.MethodPatch, "/clusters/"+lf.Namespace+"/member-1", map[string]any{"spec": map[string]any{"displayName": "Patched as " + who.name}})
			require.Equal(t, http.StatusOK, code, "an editor's PATCH, impersonated: %s", body)
			code, body = api.call(t, who.token, who.cert, http.MethodGet, "/releases", nil)
			require.Equal(t, http.StatusOK, code, string(body))
			var list struct {
				NotPermitted map[string]string `json:"notPermitted"`
			}
			require.NoError(t, json.Unmarshal(body, &list))
			require.Empty(t, list.NotPermitted, "the caller may list the set's Releases, and fleet-api lists them as the caller")
			code, body = api.call(t, who.token, who.cert, http.MethodGet, "/charts", nil)
			require.Equal(t, http.StatusOK, code, string(body))
			require.NotContains(t, string(body), "cannot impersonate")
		})
	}
	code, body := api.call(t, viewer, nil, http.MethodPatch, "/clusters/"+lf.Namespace+"/member-1", map[string]any{"spec": map[string]any{"displayName": "viewed"}})
	require.Equal(t, http.StatusForbidden, code, "a viewer may still not write: %s", body)
	require.Contains(t, string(body), "chart-viewer", "the registry refused the caller, not fleet-api's own account")
	_, err = kube.RbacV1().ClusterRoleBindings().Get(ctx, chartAccount, metav1.GetOptions{})
	require.NoError(t, err)
}

// chartAccount names the service account, its namespace and its ClusterRoleBinding as the chart
// names them for release "clusterregistry".
const chartAccount = "clusterregistry-fleet-api"

// chartAccountKubeconfig makes the chart's service account for fleet-api, binds it to the
// ClusterRole of deploy/fleet-api/clusterrole.yaml, and writes a kubeconfig of a bound token of
// it, as `kubectl create token` gives.
func chartAccountKubeconfig(t *testing.T, ctx context.Context, kube kubernetes.Interface) string {
	t.Helper()
	data, err := os.ReadFile("../../deploy/fleet-api/clusterrole.yaml")
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(data, &role))
	role.Name = chartAccount + "-test"
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	const ns = "clusterregistry-system"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: chartAccount}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: chartAccount},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: chartAccount, Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, chartAccount, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	reg := lf.Registry.Config
	ca := reg.CAData
	if len(ca) == 0 {
		ca, err = os.ReadFile(reg.CAFile)
		require.NoError(t, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["registry"] = &clientcmdapi.Cluster{Server: reg.Host, CertificateAuthorityData: ca}
	cfg.AuthInfos["fleet-api"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["fleet-api"] = &clientcmdapi.Context{Cluster: "registry", AuthInfo: "fleet-api"}
	cfg.CurrentContext = "fleet-api"
	path := filepath.Join(t.TempDir(), "fleet-api.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// bindIn binds the ClusterRole role to subject in namespace.
func bindIn(t *testing.T, ctx context.Context, kube kubernetes.Interface, namespace, role string, subject rbacv1.Subject) {
	t.Helper()
	kind := "ClusterRole"
	if _, err := kube.RbacV1().Roles(namespace).Get(ctx, role, metav1.GetOptions{}); err == nil {
		kind = "Role"
	}
	_, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: role + "-"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role}, Subjects: []rbacv1.Subject{subject}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// podBoundToken is a token of the callers' service account sa bound to a Pod, as the kubelet
// mounts one: the registry adds the Pod's name and UID to its extras.
func podBoundToken(t *testing.T, ctx context.Context, kube kubernetes.Interface, sa string) string {
	t.Helper()
	pod, err := kube.CoreV1().Pods(callers).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: sa + "-pod"},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{Name: "tool", Image: "tool"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := kube.CoreV1().ServiceAccounts(callers).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// runningAPI is fleet-api run by its own run function, over TLS.
type runningAPI struct {
	url   string
	roots *x509.CertPool
}

// runFleetAPI runs fleet-api with args (which serve TLS with --self-signed) until the end of the
// test, and waits until it serves.
func runFleetAPI(t *testing.T, ctx context.Context, args ...string) *runningAPI {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	out, w := io.Pipe()
	done := make(chan int, 1)
	var stderr strings.Builder
	go func() {
		done <- run(ctx, args, w, &stderr)
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
	t.Cleanup(func() {
		cancel()
		require.Equal(t, 0, <-done, stderr.String())
	})
	roots := x509.NewCertPool()
	pemData, err := os.ReadFile(servingCert)
	require.NoError(t, err)
	require.True(t, roots.AppendCertsFromPEM(pemData))
	return &runningAPI{url: url, roots: roots}
}

// call sends a request with a bearer token (none when empty) and client certificates.
func (a *runningAPI) call(t *testing.T, token string, certs []tls.Certificate, method, path string, body any) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		in = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(testContext(t), method, a.url+path, in)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.roots, Certificates: certs}}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}
