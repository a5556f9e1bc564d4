package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// optikonUI is the origin Optikon's UI is served from in the tests: another port than the API,
// as in Optikon's own deployment (30800 and 30900).
const optikonUI = "http://ui.optikon.example:30800"

// Optikon's /v0/clusters, path by path and status by status of its swagger: the registry's
// Clusters with NumPods and Health computed when answered (never stored) and the caller's Lat
// and Long kept; every error an APIResponse naming what is wrong.
func TestOptikonClusters(t *testing.T) {
	needsFleet(t)
	_, web := startAPIWith(t, []string{optikonUI})
	v0 := web.URL + "/v0/clusters"
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)

	code, body := call(t, http.MethodGet, v0, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var listed []v1alpha1.Cluster
	require.NoError(t, json.Unmarshal(body, &listed))
	require.GreaterOrEqual(t, len(listed), 2)
	require.Equal(t, "member-1", listed[0].Name)
	require.Equal(t, "0", listed[0].Annotations["NumPods"], "member-1's Pods (a local fleet runs none)")
	require.Equal(t, "Green", listed[0].Annotations["Health"])

	edge := map[string]any{"metadata": map[string]any{"name": "optikon-edge", "annotations": map[string]string{"Lat": "37.41", "Long": "-122.07", "NumPods": "999"}},
		"spec": map[string]any{"kubernetesApiEndpoints": map[string]any{"serverEndpoints": []any{map[string]string{"clientCIDR": "0.0.0.0/0", "serverAddress": "https://edge.example.invalid:6443"}}}}}
	code, body = call(t, http.MethodPost, v0, edge)
	requireAPIResponse(t, code, body, http.StatusCreated, "cluster optikon-edge registered")
	t.Cleanup(func() { _ = registry.Delete(testContext(t), "optikon-edge", metav1.DeleteOptions{}) })
	stored, err := registry.Get(testContext(t), "optikon-edge", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"Lat": "37.41", "Long": "-122.07"}, stored.Annotations, "what the registry stores: the caller's annotations, never the computed ones")

	var got v1alpha1.Cluster
	require.Eventually(t, func() bool {
		code, body = call(t, http.MethodGet, v0+"/optikon-edge", nil)
		return code == http.StatusOK && json.Unmarshal(body, &got) == nil
	}, 30*time.Second, 100*time.Millisecond, "the new Cluster in /v0/clusters/optikon-edge: %s", body)
	require.Equal(t, "37.41", got.Annotations["Lat"])
	require.Equal(t, "unknown", got.Annotations["NumPods"], "an unreachable member's Pods")
	require.Equal(t, "Yellow", got.Annotations["Health"], "a member never probed")

	stored.Labels = map[string]string{"region": "west"}
	code, body = call(t, http.MethodPut, v0+"/optikon-edge", stored)
	requireAPIResponse(t, code, body, http.StatusOK, "cluster optikon-edge updated")
	stored, err = registry.Get(testContext(t), "optikon-edge", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "west", stored.Labels["region"])

	code, body = call(t, http.MethodDelete, v0+"/optikon-edge", nil)
	requireAPIResponse(t, code, body, http.StatusOK, "cluster optikon-edge deleted")
	optikonErrors(t, web.URL)
}

// optikonErrors: each error of /v0/clusters is the contract's, an APIResponse that names what is
// wrong.
func optikonErrors(t *testing.T, base string) {
	viewer, err := caller(testContext(t), "optikon-viewer", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}, lf.Namespace)
	require.NoError(t, err)
	badCIDR := map[string]any{"metadata": map[string]any{"name": "bad-cidr"},
		"spec": map[string]any{"kubernetesApiEndpoints": map[string]any{"serverEndpoints": []any{map[string]string{"clientCIDR": "everywhere", "serverAddress": "https://x.example:6443"}}}}}
	for _, c := range []struct {
		token, method, path string
		body                any
		code                int
		says                string
	}{
		{operatorToken, http.MethodGet, "/v0/clusters/nosuch", nil, http.StatusNotFound, `clusters.clusterregistry.k8s.io "nosuch" not found`},
		{operatorToken, http.MethodPut, "/v0/clusters/nosuch", map[string]any{"metadata": map[string]any{"name": "nosuch"}, "spec": map[string]any{"kubernetesApiEndpoints": map[string]any{"serverEndpoints": []any{map[string]string{"clientCIDR": "0.0.0.0/0", "serverAddress": "https://x.example:6443"}}}}}, http.StatusNotFound, "not found"},
		{operatorToken, http.MethodDelete, "/v0/clusters/optikon-edge", nil, http.StatusNotFound, `"optikon-edge" not found`},
		{operatorToken, http.MethodPut, "/v0/clusters/other", map[string]any{"metadata": map[string]any{"name": "member-1"}}, http.StatusBadRequest, `the body's metadata.name is "member-1", the path's cluster "other"`},
		{operatorToken, http.MethodPost, "/v0/clusters", map[string]any{"metadata": map[string]any{"name": "x", "namespace": "elsewhere"}}, http.StatusBadRequest, `/v0 serves cluster set "` + lf.Namespace + `"`},
		{operatorToken, http.MethodPost, "/v0/clusters", map[string]any{"kind": "Cluster", "spec": 7}, http.StatusBadRequest, "the body is not a Cluster"},
		{operatorToken, http.MethodPost, "/v0/clusters", badCIDR, http.StatusBadRequest, "clientCIDR"},
		{"", http.MethodGet, "/v0/clusters", nil, http.StatusUnauthorized, "send a bearer token"},
		{viewer, http.MethodPost, "/v0/clusters", badCIDR, http.StatusForbidden, `cannot create resource "clusters"`},
		{operatorToken, http.MethodGet, "/v0/nope", nil, http.StatusNotFound, "Optikon's v0 API: /v0/clusters"},
	} {
		code, body := callAs(t, c.token, c.method, base+c.path, c.body, nil)
		requireAPIResponse(t, code, body, c.code, c.says)
	}
}

// requireAPIResponse checks an answer is an APIResponse of code saying says.
func requireAPIResponse(t *testing.T, code int, body []byte, want int, says string) {
	t.Helper()
	require.Equal(t, want, code, string(body))
	var r optikon.APIResponse
	require.NoError(t, json.Unmarshal(body, &r), string(body))
	require.Equal(t, http.StatusText(want), http.StatusText(code))
	require.Equal(t, strconv.Itoa(want), r.Code)
	require.Contains(t, r.Message, says)
}

// A page of the origin --cors-allowed-origin names may call the API from a browser: its
// preflights for PUT and DELETE with a token are answered, and its answers are readable there.
// Any other origin gets no CORS header, and its writes are refused; "*" cannot be allowed.
func TestCORS(t *testing.T) {
	needsFleet(t)
	_, web := startAPIWith(t, []string{optikonUI})
	preflight := func(origin, method string) *http.Response {
		req, err := http.NewRequestWithContext(testContext(t), http.MethodOptions, web.URL+"/v0/clusters/member-1", nil)
		require.NoError(t, err)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", method)
		req.Header.Set("Access-Control-Request-Headers", "authorization")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			requireAPIResponse(t, resp.StatusCode, body, resp.StatusCode, "may not call this server")
		}
		return resp
	}
	for _, method := range []string{http.MethodPut, http.MethodDelete} {
		resp := preflight(optikonUI, method)
		require.Equal(t, http.StatusNoContent, resp.StatusCode, method)
		require.Equal(t, optikonUI, resp.Header.Get("Access-Control-Allow-Origin"))
		require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), method)
		require.Contains(t, resp.Header.Get("Access-Control-Allow-Headers"), "Authorization")
		require.Equal(t, "true", resp.Header.Get("Access-Control-Allow-Credentials"))
	}
	resp := preflight("http://evil.example", http.MethodDelete)
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	require.Empty(t, resp.Header.Get("Access-Control-Allow-Origin"))

	fromUI := http.Header{"Origin": {optikonUI}, "Sec-Fetch-Site": {"cross-site"}}
	code, body := callAs(t, operatorToken, http.MethodGet, web.URL+"/v0/clusters", nil, fromUI)
	require.Equal(t, http.StatusOK, code, string(body))
	evil := http.Header{"Origin": {"http://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
	code, body = callAs(t, operatorToken, http.MethodDelete, web.URL+"/v0/clusters/member-1", nil, evil)
	requireAPIResponse(t, code, body, http.StatusForbidden, "a request from another site's page is refused")

	for _, bad := range []string{"*", "null", "https://ui.example/app", "ui.example:30800"} {
		require.Error(t, (&guard{}).allowOrigins([]string{bad}), bad)
	}
}

// Every path and method of Optikon's swagger answers its 401 to a caller without credentials,
// and its 400 to a query or a server it cannot serve, each as an APIResponse.
func TestOptikonContract(t *testing.T) {
	needsFleet(t)
	_, web := startAPI(t)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v0/clusters"}, {http.MethodPost, "/v0/clusters"}, {http.MethodGet, "/v0/clusters/member-1"},
		{http.MethodPut, "/v0/clusters/member-1"}, {http.MethodDelete, "/v0/clusters/member-1"},
		{http.MethodGet, "/v0/releases"}, {http.MethodPost, "/v0/releases"}, {http.MethodGet, "/v0/releases/web"},
		{http.MethodPut, "/v0/releases/web"}, {http.MethodDelete, "/v0/releases/web"},
	} {
		code, body := callAs(t, "", c.method, web.URL+c.path, nil, nil)
		requireAPIResponse(t, code, body, http.StatusUnauthorized, "send a bearer token")
	}
	for _, path := range []string{"/v0/releases?labels=a%3D%3Db%3D", "/v0/releases/web?labels=a%3D%3Db%3D"} {
		code, body := call(t, http.MethodGet, web.URL+path, nil)
		requireAPIResponse(t, code, body, http.StatusBadRequest, "is not a label selector")
	}
	code, body := call(t, http.MethodDelete, web.URL+"/v0/releases/web?labels=a%3D%3Db%3D", nil)
	requireAPIResponse(t, code, body, http.StatusBadRequest, "is not a label selector")

	other := fleettest.NewSet(t, lf)
	// A viewer of another cluster set may see nothing of this one, on any path.
	elsewhere := viewerOf(t, other, "optikon-elsewhere")
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v0/clusters"}, {http.MethodGet, "/v0/clusters/member-1"}, {http.MethodDelete, "/v0/clusters/member-1"},
		{http.MethodGet, "/v0/releases"}, {http.MethodGet, "/v0/releases/web"},
	} {
		code, body := callAs(t, elsewhere, c.method, web.URL+c.path, nil, nil)
		requireAPIResponse(t, code, body, http.StatusForbidden, "cannot")
	}
	_, both := startAPI(t, lf.Namespace, other)
	code, body = call(t, http.MethodGet, both.URL+"/v0/clusters", nil)
	requireAPIResponse(t, code, body, http.StatusBadRequest, "/v0 serves one cluster set and this server serves 2: run fleet-api with --optikon-cluster-set SET, or with -n SET")
	// Every set (-A, as the chart's default clusterSet runs it): /v0 serves the set
	// --optikon-cluster-set names, and says so when none is named.
	_, all := startAPIAs(t, apiOptions{config: lf.Registry.Config})
	code, body = call(t, http.MethodGet, all.URL+"/v0/clusters", nil)
	requireAPIResponse(t, code, body, http.StatusBadRequest, "this server serves every set (-A): run fleet-api with --optikon-cluster-set SET")
	_, chosen := startAPIAs(t, apiOptions{config: lf.Registry.Config, optikonSet: lf.Namespace})
	require.Eventually(t, func() bool {
		code, body = call(t, http.MethodGet, chosen.URL+"/v0/clusters", nil)
		require.Equal(t, http.StatusOK, code, string(body))
		for _, m := range lf.Members {
			if !strings.Contains(string(body), `"name":"`+m.Name+`"`) {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "with -A and --optikon-cluster-set, /v0 lists that set's clusters: %s", body)
}

// viewerOf is a token of a caller who may get, list and watch the Clusters and Releases (and their
// slices and history) of cluster set ns alone.
func viewerOf(t *testing.T, ns, name string) string {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.RbacV1().Roles(ns).Create(testContext(t), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters", "releases", "releasestatusslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	token, err := caller(testContext(t), name, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}, ns)
	require.NoError(t, err)
	return token
}
