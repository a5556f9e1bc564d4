package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/user"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// clusterRole makes, in cluster set ns, a Role named name that grants verbs on Clusters.
func clusterRole(t *testing.T, ns, name string, verbs ...string) rbacv1.RoleRef {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).RbacV1().Roles(ns).Create(testContext(t), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters"}, Verbs: verbs}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
}

func newCluster(ns, name string) map[string]any {
	return map[string]any{
		"apiVersion": "clusterregistry.k8s.io/v1alpha1", "kind": "Cluster",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"kubernetesApiEndpoints": map[string]any{
			"serverEndpoints": []any{map[string]any{"clientCIDR": "0.0.0.0/0", "serverAddress": "https://127.0.0.1:1"}},
		}},
	}
}

// Every request acts for its caller, within the registry's RBAC: whoever has no credentials, or
// credentials the registry does not take, a page of another site, a page reached through a host
// name the server does not serve, a viewer of one cluster set and an editor of one set each get
// what the registry would give them, and change nothing they could not change in the registry.
func TestCallersGetWhatTheRegistryGivesThem(t *testing.T) {
	needsFleet(t)
	ctx := testContext(t)
	other := fleettest.CopySet(t, lf, "member-2") // a second cluster set, with member-2 in it
	viewer, err := caller(ctx, "viewer", clusterRole(t, lf.Namespace, "clusters-viewer", "get", "list", "watch"), lf.Namespace)
	require.NoError(t, err)
	editor, err := caller(ctx, "editor", clusterRole(t, lf.Namespace, "clusters-editor", "get", "list", "watch", "create", "update", "patch", "delete"), lf.Namespace)
	require.NoError(t, err)
	nobody, err := caller(ctx, "nobody", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "none"}, callers)
	require.NoError(t, err)
	s, web := startAPI(t, lf.Namespace, other)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	clusterCount := func() int {
		n := 0
		for _, ns := range []string{lf.Namespace, other} {
			list, err := registry.Clusters(ns).List(ctx, metav1.ListOptions{})
			require.NoError(t, err)
			n += len(list.Items)
		}
		return n
	}
	before := clusterCount()
	requireNoFleet := func(body []byte) {
		t.Helper()
		for _, m := range lf.Members {
			require.NotContains(t, string(body), m.Name, "the answer tells about the fleet")
		}
	}
	names := func(body []byte) []string { return summaryNames(t, body) }
	fx := &fleetAPICallers{ctx: ctx, other: other, viewer: viewer, editor: editor, nobody: nobody, s: s, web: web, registry: registry, clusterCount: clusterCount, before: before, requireNoFleet: requireNoFleet, names: names}
	fx.nobodyGetsNothing(t)
	fx.crossSite(t)
	fx.unservedRoutes(t)
	fx.rebindingAndDashboard(t)
	fx.noRights(t)
	fx.viewerOfOneSet(t)
	fx.editorOfOneSet(t)
	fx.asTheCaller(t)
}

// fleetAPICallers is what the parts of TestCallersGetWhatTheRegistryGivesThem share, in order: each
// starts where the one before it left the registry.
type fleetAPICallers struct {
	ctx            context.Context
	other          string
	viewer         string
	editor         string
	nobody         string
	s              *server
	web            *httptest.Server
	registry       crv1alpha1.ClusterregistryV1alpha1Interface
	clusterCount   func() int
	before         int
	requireNoFleet func(body []byte)
	names          func(body []byte) []string
}

// nobodyGetsNothing: nobody (no credentials, or a token the registry does not take) gets nothing.
func (fx *fleetAPICallers) nobodyGetsNothing(t *testing.T) {
	viewer, web, requireNoFleet := fx.viewer, fx.web, fx.requireNoFleet
	// Nobody: no credentials, or a token the registry does not take.
	for _, token := range []string{"", "not-a-token", viewer + "x"} {
		for _, r := range []struct{ method, path string }{
			{http.MethodGet, "/clusters"}, {http.MethodGet, "/clusters/" + lf.Namespace + "/member-1"},
			{http.MethodPost, "/clusters"}, {http.MethodDelete, "/clusters/" + lf.Namespace + "/member-1"},
		} {
			var body any
			if r.method == http.MethodPost {
				body = newCluster(lf.Namespace, "intruder")
			}
			code, out := callAs(t, token, r.method, web.URL+r.path, body, nil)
			require.Equal(t, http.StatusUnauthorized, code, "%s %s with %q: %s", r.method, r.path, token, out)
			requireNoFleet(out)
		}
	}
}

// crossSite: a page of another site is refused, whatever credentials its browser sends.
func (fx *fleetAPICallers) crossSite(t *testing.T) {
	editor, web, requireNoFleet := fx.editor, fx.web, fx.requireNoFleet
	// A page of another site: a form's text/plain post (no preflight), even one that a browser
	// sends with a client certificate or a token it holds; an Origin or Sec-Fetch-Site elsewhere.
	// A body that is not JSON is 415 Unsupported Media Type, as the registry answers it (it was
	// 403); a request marked as another site's is 403.
	for _, tc := range []struct {
		header http.Header
		code   int
	}{
		{http.Header{"Content-Type": {"text/plain"}}, http.StatusUnsupportedMediaType},
		{http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, http.StatusUnsupportedMediaType},
		{http.Header{"Origin": {"https://evil.example.com"}}, http.StatusForbidden},
		{http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
	} {
		code, out := callAs(t, editor, http.MethodPost, web.URL+"/clusters", newCluster(lf.Namespace, "cross-site"), tc.header)
		require.Equal(t, tc.code, code, "%v: %s", tc.header, out)
		require.Equal(t, int32(tc.code), status(t, out).Code, "%v: not a Status: %s", tc.header, out)
		requireNoFleet(out)
	}
	code, out := callAs(t, "", http.MethodPost, web.URL+"/clusters", newCluster(lf.Namespace, "cross-site"), http.Header{"Content-Type": {"text/plain"}})
	require.Equal(t, http.StatusUnauthorized, code, string(out))
}

// unservedRoutes: a route not served, or a method a route does not take, is answered with a Status,
// never before the caller is known.
func (fx *fleetAPICallers) unservedRoutes(t *testing.T) {
	viewer, web := fx.viewer, fx.web
	// A route that is not served, or a method a route does not take, is answered with a Status,
	// as --help promises (it was Go's plain text), and never before the caller is known.
	code, out := callAs(t, viewer, http.MethodGet, web.URL+"/nodes", nil, nil)
	require.Equal(t, http.StatusNotFound, code, string(out))
	require.Equal(t, metav1.StatusReasonNotFound, status(t, out).Reason)
	code, out = callAs(t, viewer, http.MethodPost, web.URL+"/watch/clusters", map[string]any{}, nil)
	require.Equal(t, http.StatusMethodNotAllowed, code, string(out))
	require.Equal(t, metav1.StatusReasonMethodNotAllowed, status(t, out).Reason)
	require.Contains(t, status(t, out).Message, "GET")
	code, out = callAs(t, "", http.MethodGet, web.URL+"/nodes", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code, "nobody learns which routes exist: %s", out)
}

// rebindingAndDashboard: a page behind a rebinding host name is refused; the dashboard page is
// served to anyone, under a policy that runs only its own script, but not through a rebinding host.
func (fx *fleetAPICallers) rebindingAndDashboard(t *testing.T) {
	ctx, viewer, web, requireNoFleet := fx.ctx, fx.viewer, fx.web, fx.requireNoFleet
	// A page behind a rebinding host name reaches this server's address with another Host.
	_, port, _ := strings.Cut(strings.TrimPrefix(web.URL, "http://"), ":")
	code, out := callAs(t, viewer, http.MethodGet, web.URL+"/clusters", nil, http.Header{"Host": {"rebind.evil.example.com:" + port}})
	require.Equal(t, http.StatusBadRequest, code, string(out))
	requireNoFleet(out)

	// The dashboard page is served to anyone (it holds nothing of the fleet, and asks the API as
	// its user), under a policy that runs only its own script, never in another site's frame.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, web.URL+"/", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireNoFleet(page)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'")
	code, out = callAs(t, "", http.MethodGet, web.URL+"/", nil, http.Header{"Host": {"rebind.evil.example.com:" + port}})
	require.Equal(t, http.StatusBadRequest, code, "the page through a rebinding host: %s", out)
}

// noRights: a caller the registry knows, with no rights on Clusters, sees no member.
func (fx *fleetAPICallers) noRights(t *testing.T) {
	nobody, web, names := fx.nobody, fx.web, fx.names
	// A caller the registry knows, with no rights on Clusters, sees no member.
	code, out := callAs(t, nobody, http.MethodGet, web.URL+"/clusters", nil, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	require.Empty(t, names(out))
}

// viewerOfOneSet: a viewer of one set sees that set's members alone, and changes nothing.
func (fx *fleetAPICallers) viewerOfOneSet(t *testing.T) {
	other, viewer, web, names := fx.other, fx.viewer, fx.web, fx.names
	// A viewer of one set sees that set's members alone, and changes nothing.
	code, out := callAs(t, viewer, http.MethodGet, web.URL+"/clusters", nil, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	require.ElementsMatch(t, []string{lf.Namespace + "/member-1", lf.Namespace + "/member-2"}, names(out))
	code, out = callAs(t, viewer, http.MethodGet, web.URL+"/clusters/"+lf.Namespace+"/member-1", nil, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/clusters/" + other + "/member-2", nil},
		{http.MethodGet, "/clusters/" + other + "/no-such-member", nil}, // 403, not 404: existence is not told
		{http.MethodPost, "/clusters", newCluster(lf.Namespace, "viewers")},
		{http.MethodPut, "/clusters/" + lf.Namespace + "/member-1", newCluster(lf.Namespace, "member-1")},
		{http.MethodPatch, "/clusters/" + lf.Namespace + "/member-1", map[string]any{"spec": map[string]any{"displayName": "owned"}}},
		{http.MethodDelete, "/clusters/" + lf.Namespace + "/member-1", nil},
	} {
		code, out := callAs(t, viewer, r.method, web.URL+r.path, r.body, nil)
		require.Equal(t, http.StatusForbidden, code, "viewer %s %s: %s", r.method, r.path, out)
		st := status(t, out)
		require.Equal(t, metav1.StatusReasonForbidden, st.Reason)
		require.Contains(t, st.Message, "system:serviceaccount:"+callers+":viewer", "the refusal names the caller, as the registry's does")
	}
}

// editorOfOneSet: an editor of one set writes there, and not into another set.
func (fx *fleetAPICallers) editorOfOneSet(t *testing.T) {
	ctx, other, editor, web, registry, clusterCount, before := fx.ctx, fx.other, fx.editor, fx.web, fx.registry, fx.clusterCount, fx.before
	// An editor of one set writes there, and not into another set.
	code, out := callAs(t, editor, http.MethodPost, web.URL+"/clusters", newCluster(other, "smuggled"), nil)
	require.Equal(t, http.StatusForbidden, code, string(out))
	code, out = callAs(t, editor, http.MethodDelete, web.URL+"/clusters/"+other+"/member-2", nil, nil)
	require.Equal(t, http.StatusForbidden, code, string(out))
	code, out = callAs(t, editor, http.MethodPatch, web.URL+"/clusters/"+other+"/member-2", map[string]any{"spec": map[string]any{"displayName": "owned"}}, nil)
	require.Equal(t, http.StatusForbidden, code, string(out))
	require.Equal(t, before, clusterCount(), "a refused caller changed the registry")
	c, err := registry.Clusters(other).Get(ctx, "member-2", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, "owned", c.Spec.DisplayName)

	code, out = callAs(t, editor, http.MethodPost, web.URL+"/clusters", newCluster(lf.Namespace, "edited"), nil)
	require.Equal(t, http.StatusCreated, code, string(out))
	code, out = callAs(t, editor, http.MethodPatch, web.URL+"/clusters/"+lf.Namespace+"/edited", map[string]any{"spec": map[string]any{"displayName": "Edited"}},
		http.Header{"Content-Type": {"application/merge-patch+json"}})
	require.Equal(t, http.StatusOK, code, string(out))
	c, err = registry.Clusters(lf.Namespace).Get(ctx, "edited", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "Edited", c.Spec.DisplayName)
	put := newCluster(lf.Namespace, "edited")
	put["spec"].(map[string]any)["displayName"] = "Replaced"
	code, out = callAs(t, editor, http.MethodPut, web.URL+"/clusters/"+lf.Namespace+"/edited", put, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	code, out = callAs(t, editor, http.MethodDelete, web.URL+"/clusters/"+lf.Namespace+"/edited", nil, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	_, err = registry.Clusters(lf.Namespace).Get(ctx, "edited", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
}

// asTheCaller: writes go to the registry as the caller, not as the server.
func (fx *fleetAPICallers) asTheCaller(t *testing.T) {
	ctx, s := fx.ctx, fx.s
	// Writes go to the registry as the caller, not as the server: the registry itself sees the
	// caller (and so decides, and audits, for them).
	cfg, err := s.guard.callerConfig(genericrequest.WithUser(context.Background(), &user.DefaultInfo{
		Name: "system:serviceaccount:" + callers + ":editor", Groups: []string{"system:serviceaccounts", user.AllAuthenticated},
	}))
	require.NoError(t, err)
	review, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err, "the registry did not say who the server's writes act as")
	require.Equal(t, "system:serviceaccount:"+callers+":editor", review.Status.UserInfo.Username)
}

// The seed's last two routes, as each kind of caller: GET /watch/clusters/{ns}/{name} streams one
// member to whoever may watch that Cluster (a Role naming the Cluster alone is enough, and gives
// no other), and DELETE /clusters?namespace= deletes the chosen Clusters of one set for whoever
// may deletecollection there, as the caller, answering what was deleted.
func TestWatchOneClusterAndDeleteACollection(t *testing.T) {
	needsFleet(t)
	ctx := testContext(t)
	sweep := fleettest.CopySet(t, lf, "member-1")
	admin := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := admin.RbacV1().Roles(lf.Namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "watch-member-1-" + sweep},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters"}, ResourceNames: []string{"member-1"}, Verbs: []string{"get", "watch"}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	oneWatcher, err := caller(ctx, "one-watcher-"+sweep, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "watch-member-1-" + sweep}, lf.Namespace)
	require.NoError(t, err)
	viewer, err := caller(ctx, "viewer-"+sweep, clusterRole(t, sweep, "sweep-viewer", "get", "list", "watch"), sweep)
	require.NoError(t, err)
	sweeper, err := caller(ctx, "sweeper-"+sweep, clusterRole(t, sweep, "sweeper", "get", "list", "deletecollection"), sweep)
	require.NoError(t, err)
	_, web := startAPI(t, lf.Namespace, sweep)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	f := &sweepCallers{ctx: ctx, sweep: sweep, oneWatcher: oneWatcher, viewer: viewer, sweeper: sweeper, web: web, registry: registry}
	t.Run("one Cluster's stream", f.oneClustersStream)
	t.Run("deleting a set's chosen Clusters", f.deletingASetsChosenClusters)
}

// sweepCallers is what the subtests of TestWatchOneClusterAndDeleteACollection share.
type sweepCallers struct {
	ctx        context.Context
	sweep      string
	oneWatcher string
	viewer     string
	sweeper    string
	web        *httptest.Server
	registry   crv1alpha1.ClusterregistryV1alpha1Interface
}

// oneClustersStream is the subtest "one Cluster's stream" of TestWatchOneClusterAndDeleteACollection.
func (f *sweepCallers) oneClustersStream(t *testing.T) {
	ctx, oneWatcher, viewer, web, registry := f.ctx, f.oneWatcher, f.viewer, f.web, f.registry
	_, code := watch(t, "", web.URL+"/watch/clusters/"+lf.Namespace+"/member-1")
	require.Equal(t, http.StatusUnauthorized, code)
	_, code = watch(t, oneWatcher, web.URL+"/watch/clusters/"+lf.Namespace+"/member-2")
	require.Equal(t, http.StatusForbidden, code, "a Role naming member-1 watched member-2")
	_, code = watch(t, viewer, web.URL+"/watch/clusters/"+lf.Namespace+"/member-1")
	require.Equal(t, http.StatusForbidden, code, "a viewer of another set watched this one's member")
	events, code := watch(t, oneWatcher, web.URL+"/watch/clusters/"+lf.Namespace+"/member-1")
	require.Equal(t, http.StatusOK, code)
	e := next(t, events, 10*time.Second)
	require.Equal(t, eventAdded, e.Type)
	require.Equal(t, "member-1", e.Cluster.Name)
	// A change to the other member sends nothing; one to this member is MODIFIED.
	for _, name := range []string{"member-2", "member-1"} {
		_, err := registry.Clusters(lf.Namespace).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"watched-one":"`+name+`"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	// member-1's summary may change meanwhile for other reasons (its caches syncing): every
	// event is member-1's, up to the label's and for a few polls after it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		e = next(t, events, time.Until(deadline))
		require.Equal(t, "member-1", e.Cluster.Name, "the stream of member-1 sent another member")
		if e.Cluster.Labels["watched-one"] == "member-1" {
			require.Equal(t, eventModified, e.Type)
			break
		}
	}
	for quiet := time.After(3 * feedInterval); ; {
		select {
		case e, ok := <-events:
			require.True(t, ok, "the stream ended")
			require.True(t, e.Type == eventBookmark || e.Cluster.Name == "member-1", "the stream of member-1 sent %s", e.Cluster.Name)
			continue
		case <-quiet:
		}
		break
	}
}

// deletingASetsChosenClusters is the subtest "deleting a set's chosen Clusters" of TestWatchOneClusterAndDeleteACollection.
func (f *sweepCallers) deletingASetsChosenClusters(t *testing.T) {
	ctx, sweep, viewer, sweeper, web, registry := f.ctx, f.sweep, f.viewer, f.sweeper, f.web, f.registry
	for _, name := range []string{"tmp-1", "tmp-2"} {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: sweep, Labels: map[string]string{"tmp": "yes"}},
			Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://127.0.0.1:1"}}}}}
		_, err := registry.Clusters(sweep).Create(ctx, c, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	remaining := func(ns string) []string {
		list, err := registry.Clusters(ns).List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		var out []string
		for _, c := range list.Items {
			out = append(out, c.Name)
		}
		return out
	}
	code, out := callAs(t, "", http.MethodDelete, web.URL+"/clusters?namespace="+sweep, nil, nil)
	require.Equal(t, http.StatusUnauthorized, code, string(out))
	code, out = callAs(t, sweeper, http.MethodDelete, web.URL+"/clusters?labelSelector=tmp%3Dyes", nil, nil)
	require.Equal(t, http.StatusBadRequest, code, string(out))
	require.Contains(t, status(t, out).Message, "namespace")
	code, out = callAs(t, viewer, http.MethodDelete, web.URL+"/clusters?namespace="+sweep, nil, nil)
	require.Equal(t, http.StatusForbidden, code, "a viewer deleted a collection: %s", out)
	code, out = callAs(t, sweeper, http.MethodDelete, web.URL+"/clusters?namespace="+lf.Namespace, nil, nil)
	require.Equal(t, http.StatusForbidden, code, "a sweeper of one set deleted another's: %s", out)
	require.ElementsMatch(t, []string{"member-1", "member-2"}, remaining(lf.Namespace))
	require.ElementsMatch(t, []string{"member-1", "tmp-1", "tmp-2"}, remaining(sweep))

	code, out = callAs(t, sweeper, http.MethodDelete, web.URL+"/clusters?namespace="+sweep+"&labelSelector=tmp%3Dyes", nil, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	var deleted v1alpha1.ClusterList
	require.NoError(t, json.Unmarshal(out, &deleted), string(out))
	var names []string
	for _, c := range deleted.Items {
		names = append(names, c.Name)
		require.Empty(t, c.ManagedFields)
	}
	require.ElementsMatch(t, []string{"tmp-1", "tmp-2"}, names, "the answer names what was deleted")
	require.Equal(t, []string{"member-1"}, remaining(sweep))
}
