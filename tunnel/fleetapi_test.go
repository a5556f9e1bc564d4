package tunnel_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/gobuild"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// fleet-api, run as an operator runs it with the reader's tunnel flags, answers what runs on the
// member in its own network from a watch cache that lives through the tunnel: its list counts the
// member's Deployment, and Optikon's /v0 shows the member Green with its Pods counted.
func TestFleetAPIThroughTheTunnel(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 3*time.Minute)
	bin := filepath.Join(gobuild.Commands(t, "..", "./cmd/fleet-api"), "fleet-api")
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	r.tunnelledMember(t, ns, memberAddress(t))
	require.Equal(t, v1alpha1.ReasonReachable, probe(t, ns, resolverFor(t, r.dialer())).Reason) // writes Ready, as health would
	member := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	labels := map[string]string{"app": "hello-" + ns}
	_, err := member.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "hello-" + ns},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "hello", Image: "hello:1"}}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)

	api := exec.Command(bin, append([]string{"--kubeconfig=" + lf.Registry.Kubeconfig, "-n", ns, "--listen=127.0.0.1:0"}, r.trustFlags(t, "fleet-api")...)...)
	url := serving(t, api)
	token := viewerToken(t, ns)

	get := func(path string, out any) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+path, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", path, body)
		require.NoError(t, json.Unmarshal(body, out), "GET %s: %s", path, body)
	}
	type summary struct {
		Name  string `json:"name"`
		Cache struct {
			State string `json:"state"`
		} `json:"cache"`
		Workloads struct {
			Deployments *int `json:"deployments"`
		} `json:"workloads"`
	}
	var list struct {
		Clusters []summary `json:"clusters"`
	}
	require.Eventually(t, func() bool {
		get("/clusters", &list)
		return len(list.Clusters) == 1 && list.Clusters[0].Cache.State == "Synced"
	}, time.Minute, 200*time.Millisecond, "fleet-api's cache of the member did not sync through the tunnel: %+v", list)
	require.NotNil(t, list.Clusters[0].Workloads.Deployments)
	require.Positive(t, *list.Clusters[0].Workloads.Deployments, "the member's Deployment was not counted")

	var v0 []v1alpha1.Cluster
	get("/v0/clusters", &v0)
	require.Len(t, v0, 1)
	require.Equal(t, "member-1", v0[0].Name)
	require.Equal(t, "Green", v0[0].Annotations["Health"], "Optikon's health of the tunnelled member")
	require.NotEqual(t, "unknown", v0[0].Annotations["NumPods"])
}

// trustFlags are a reader's tunnel flags for the rig's frontend, with a client certificate of
// user name in system:masters.
func (r *rig) trustFlags(t *testing.T, name string) []string {
	t.Helper()
	cert, key := testcerts.PEM(r.readers.Client(name, "system:masters"))
	return []string{"--tunnel-server=" + r.frontend, "--tunnel-ca=" + writeFile(t, r.dir, name+"-ca.crt", r.readers.PEM),
		"--tunnel-cert=" + writeFile(t, r.dir, name+".crt", cert), "--tunnel-key=" + writeFile(t, r.dir, name+".key", key)}
}

// serving starts fleet-api and returns the address it says it serves on.
func serving(t *testing.T, api *exec.Cmd) string {
	t.Helper()
	out, err := api.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	api.Stderr = &stderr
	require.NoError(t, api.Start())
	t.Cleanup(func() { _ = api.Process.Kill(); _ = api.Wait() })
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if _, addr, ok := strings.Cut(lines.Text(), " members on "); ok {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return addr
		}
	}
	t.Fatalf("fleet-api did not serve: %s", stderr.String())
	return ""
}

// viewerToken is a token of a ServiceAccount of ns that may read its Clusters and nothing else:
// fleet-api's caller.
func viewerToken(t *testing.T, ns string) string {
	t.Helper()
	ctx := fleettest.Context(t, time.Minute)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"},
	}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "viewer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "viewer", Namespace: ns}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "viewer", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}
