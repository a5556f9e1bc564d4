package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// releasesRole is a Role of ns over Releases and their status slices with verbs.
func releasesRole(t *testing.T, ns, name string, verbs ...string) rbacv1.RoleRef {
	t.Helper()
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).RbacV1().Roles(ns).Create(testContext(t), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"releases"}, Verbs: verbs},
			{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"releasestatusslices"}, Verbs: []string{"get", "list"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
}

// /charts releases charts on a Placement's members, changes and removes them, and lists them
// with each member's phase, as the caller: nobody gets 401; a viewer sees their set's chart
// releases and changes nothing; an editor of another set neither sees nor touches this set's;
// the set's editor releases, changes the version and values, and deletes; a page of another site
// is refused. Releases of manifests are not chart releases, and are not served here.
func TestChartsAsEachCaller(t *testing.T) {
	needsFleet(t)
	ctx := testContext(t)
	set := fleettest.CopySet(t, lf)
	other := fleettest.CopySet(t, lf)
	viewer, err := caller(ctx, "charts-viewer-"+set, releasesRole(t, set, "charts-viewer", "get", "list", "watch"), set)
	require.NoError(t, err)
	editor, err := caller(ctx, "charts-editor-"+set, releasesRole(t, set, "charts-editor", "get", "list", "watch", "create", "update", "delete"), set)
	require.NoError(t, err)
	otherEditor, err := caller(ctx, "charts-editor-"+other, releasesRole(t, other, "charts-editor", "get", "list", "watch", "create", "update", "delete"), other)
	require.NoError(t, err)
	srv, web := startAPI(t, set, other)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()

	shop := map[string]any{
		"namespace": set, "name": "shop", "placement": "web", "targetNamespace": "shop",
		"chart":        map[string]any{"url": "oci://registry.example.com/charts/shop", "version": "~1.2", "secretRef": "pull"},
		"values":       map[string]any{"replicas": 3},
		"memberValues": []any{map[string]any{"path": "region", "from": "Label", "key": "topology.kubernetes.io/region"}},
	}
	list := func(token string) []chartRelease {
		code, out := callAs(t, token, http.MethodGet, web.URL+"/charts", nil, nil)
		require.Equal(t, http.StatusOK, code, string(out))
		var got struct{ Charts []chartRelease }
		require.NoError(t, json.Unmarshal(out, &got))
		return got.Charts
	}
	s := &chartsCallers{ctx: ctx, set: set, viewer: viewer, editor: editor, otherEditor: otherEditor, srv: srv, web: web, registry: registry, shop: shop, list: list}
	s.refusals(t)
	s.release(t)
	s.listReleases(t)
	s.watchCharts(t)
	s.change(t)
	s.remove(t)
}

// chartsCallers is what the parts of TestChartsAsEachCaller share, in order: each starts where the
// one before it left the registry.
type chartsCallers struct {
	ctx         context.Context
	set         string
	viewer      string
	editor      string
	otherEditor string
	srv         *server
	web         *httptest.Server
	registry    crv1alpha1.ClusterregistryV1alpha1Interface
	shop        map[string]any
	list        func(token string) []chartRelease
}

// refusals: nobody, a viewer, another set's editor and a page of another site may not release a
// chart.
func (s *chartsCallers) refusals(t *testing.T) {
	viewer, editor, otherEditor, web, shop := s.viewer, s.editor, s.otherEditor, s.web, s.shop
	code, out := callAs(t, "", http.MethodGet, web.URL+"/charts", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code, string(out))
	code, out = callAs(t, "", http.MethodPost, web.URL+"/charts", shop, nil)
	require.Equal(t, http.StatusUnauthorized, code, string(out))

	// Neither a viewer nor another set's editor may release here: the registry says so.
	for _, token := range []string{viewer, otherEditor} {
		code, out = callAs(t, token, http.MethodPost, web.URL+"/charts", shop, nil)
		require.Equal(t, http.StatusForbidden, code, string(out))
		require.Equal(t, metav1.StatusReasonForbidden, status(t, out).Reason)
	}
	// A page of another site, with the editor's token, is refused before anything is asked.
	code, out = callAs(t, editor, http.MethodPost, web.URL+"/charts", shop, http.Header{"Origin": {"https://evil.example.com"}})
	require.Equal(t, http.StatusForbidden, code, string(out))
	code, out = callAs(t, editor, http.MethodPost, web.URL+"/charts", shop, http.Header{"Content-Type": {"text/plain"}})
	require.Equal(t, http.StatusUnsupportedMediaType, code, string(out))
}

// release: the set's editor releases the chart, beside a Release of manifests; what the controller
// reports is listed.
func (s *chartsCallers) release(t *testing.T) {
	ctx, set, viewer, editor, otherEditor, web, registry, shop, list := s.ctx, s.set, s.viewer, s.editor, s.otherEditor, s.web, s.registry, s.shop, s.list
	// The set's editor releases the chart; a bad request names what is wrong.
	code, out := callAs(t, editor, http.MethodPost, web.URL+"/charts", map[string]any{"namespace": set, "name": "bad", "placement": "web", "chart": map[string]any{}}, nil)
	require.Equal(t, http.StatusBadRequest, code, string(out))
	require.Contains(t, status(t, out).Message, "chart: set url")
	code, out = callAs(t, editor, http.MethodPost, web.URL+"/charts", map[string]any{"namespace": set, "name": "bad", "placement": "web", "chart": map[string]any{"url": "ftp://x/y"}}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, code, "the registry's validation: %s", out)
	code, out = callAs(t, editor, http.MethodPost, web.URL+"/charts", shop, nil)
	require.Equal(t, http.StatusCreated, code, string(out))
	rel, err := registry.Releases(set).Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "~1.2", rel.Spec.Source.Chart.Repository.Version)
	require.Equal(t, "pull", rel.Spec.Source.Chart.Repository.SecretRef.Name)
	require.JSONEq(t, `{"replicas":3}`, string(rel.Spec.Source.Chart.Values.Raw))
	require.Contains(t, rel.ManagedFields[0].Manager, "fleet-api")

	// A Release of manifests beside it is not a chart release.
	_, err = registry.Releases(set).Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: set}, Spec: v1alpha1.ReleaseSpec{
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
		Source:    v1alpha1.ReleaseSource{ConfigMap: &v1alpha1.ReleaseConfigMapSource{Name: "manifests"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	code, out = callAs(t, editor, http.MethodGet, web.URL+"/charts/"+set+"/plain", nil, nil)
	require.Equal(t, http.StatusNotFound, code, string(out))

	// What the releases controller reports, each member's phase from the status slices, is
	// listed: as the controller would, the test writes status and a slice.
	rel.Status = v1alpha1.ReleaseStatus{ObservedGeneration: rel.Generation, Revision: "r1", Members: 2, Ready: 1,
		Chart:      &v1alpha1.ReleaseChartStatus{Name: "shop", Version: "1.2.3", Digest: "sha256:" + string(make64('a'))},
		Conditions: []metav1.Condition{{Type: v1alpha1.ReleaseAvailable, Status: metav1.ConditionFalse, Reason: "RollingOut", Message: "1 of 2 members ready", LastTransitionTime: metav1.Now()}}}
	_, err = registry.Releases(set).UpdateStatus(ctx, rel, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = registry.ReleaseStatusSlices(set).Create(ctx, &v1alpha1.ReleaseStatusSlice{ObjectMeta: metav1.ObjectMeta{Name: "shop-0", Namespace: set,
		Labels:          map[string]string{v1alpha1.ReleaseLabel: "shop"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))}},
		Members: []v1alpha1.ReleaseMemberStatus{
			{Cluster: "member-2", Phase: v1alpha1.PhaseProgressing, Revision: "r1", Reason: "WaitingForHealth", Message: "<script>alert(1)</script>"},
			{Cluster: "member-1", Phase: v1alpha1.PhaseReady, Revision: "r1"},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, token := range []string{viewer, editor} {
		got := list(token)
		require.Len(t, got, 1, "only the chart release, only this set's")
		c := got[0]
		require.Equal(t, "shop", c.Name)
		require.Equal(t, chartSpec{URL: "oci://registry.example.com/charts/shop", Version: "~1.2", SecretRef: "pull", Mode: "Render"}, c.Chart, "the mode shown, Render when unset")
		require.Equal(t, "1.2.3", c.Delivered.Version)
		require.Equal(t, []chartMember{{Cluster: "member-1", Phase: "Ready", Revision: "r1"},
			{Cluster: "member-2", Phase: "Progressing", Revision: "r1", Reason: "WaitingForHealth", Message: "<script>alert(1)</script>"}}, c.PerMember)
		require.True(t, meta.IsStatusConditionFalse(toConditions(c.Conditions), v1alpha1.ReleaseAvailable))
	}
	require.Empty(t, list(otherEditor), "another set's editor saw this set's chart release")
}

// listReleases: GET /releases lists every Release, whatever it delivers, as the caller may list
// them.
func (s *chartsCallers) listReleases(t *testing.T) {
	viewer, otherEditor, web := s.viewer, s.otherEditor, s.web
	// GET /releases: every Release, whatever it delivers, as the caller may list them.
	listAll := func(token string) map[string]chartRelease {
		code, out := callAs(t, token, http.MethodGet, web.URL+"/releases", nil, nil)
		require.Equal(t, http.StatusOK, code, string(out))
		var got struct{ Releases []chartRelease }
		require.NoError(t, json.Unmarshal(out, &got))
		byName := map[string]chartRelease{}
		for _, r := range got.Releases {
			byName[r.Name] = r
		}
		return byName
	}
	all := listAll(viewer)
	require.Len(t, all, 2)
	require.Equal(t, "Chart", all["shop"].Source)
	require.Equal(t, "ConfigMap", all["plain"].Source)
	require.Equal(t, "manifests", all["plain"].ConfigMap)
	require.Zero(t, all["plain"].Chart, "a Release of manifests shown with a chart")
	require.Empty(t, listAll(otherEditor), "another set's editor saw this set's releases")
	code, _ := callAs(t, "", http.MethodGet, web.URL+"/releases", nil, nil)
	require.Equal(t, http.StatusUnauthorized, code)
}

// watchCharts: the streams start with what the caller may see, send its changes, and nothing when
// only times change.
func (s *chartsCallers) watchCharts(t *testing.T) {
	ctx, set, viewer, otherEditor, srv, web, registry := s.ctx, s.set, s.viewer, s.otherEditor, s.srv, s.web, s.registry
	// GET /watch/charts: the viewer's stream starts with the chart release and sends its changes;
	// nobody gets 401; another set's editor's stream sends nothing of this set; a status written
	// again with only its times changed sends nothing.
	_, code := watch(t, "", web.URL+"/watch/charts")
	require.Equal(t, http.StatusUnauthorized, code)
	_, code = watch(t, otherEditor, web.URL+"/watch/charts?namespace="+set)
	require.Equal(t, http.StatusForbidden, code)
	// The stream is the server's own watch of the registry, polled: wait until it has what the
	// registry has, so that the first event is the whole chart release.
	require.Eventually(t, func() bool {
		current, _, _ := srv.charts.feed.snapshot()
		for _, c := range current {
			if c.Name == "shop" {
				return len(current) == 2 && len(c.PerMember) == 2 && c.Ready == 1
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond, "the feed did not catch up with the registry")
	events, code := watch(t, viewer, web.URL+"/watch/charts")
	require.Equal(t, http.StatusOK, code)
	e := next(t, events, 10*time.Second)
	require.Equal(t, eventAdded, e.Type)
	require.Equal(t, "shop", e.Chart.Name)
	require.Len(t, e.Chart.PerMember, 2)
	// GET /watch/releases starts with every Release, the one of manifests too.
	releaseEvents, code := watch(t, viewer, web.URL+"/watch/releases")
	require.Equal(t, http.StatusOK, code)
	sources := map[string]string{}
	for range 2 {
		e := next(t, releaseEvents, 10*time.Second)
		require.Equal(t, eventAdded, e.Type)
		require.NotNil(t, e.Release, "an event of /watch/releases without its release")
		sources[e.Release.Name] = e.Release.Source
	}
	require.Equal(t, map[string]string{"shop": "Chart", "plain": "ConfigMap"}, sources)
	otherEvents, code := watch(t, otherEditor, web.URL+"/watch/charts")
	require.Equal(t, http.StatusOK, code)
	rel, err := registry.Releases(set).Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	rel.Status.Conditions[0].LastTransitionTime = metav1.NewTime(rel.Status.Conditions[0].LastTransitionTime.Add(time.Minute))
	rel, err = registry.Releases(set).UpdateStatus(ctx, rel, metav1.UpdateOptions{})
	require.NoError(t, err)
	time.Sleep(3 * feedInterval) // the feed polls meanwhile: the write above is seen on its own
	rel.Status.Ready = 2
	_, err = registry.Releases(set).UpdateStatus(ctx, rel, metav1.UpdateOptions{})
	require.NoError(t, err)
	e = next(t, events, 10*time.Second)
	require.Equal(t, eventModified, e.Type)
	require.EqualValues(t, 2, e.Chart.Ready, "the first change sent was not the one that changed something")
	for quiet := time.After(3 * feedInterval); ; {
		select {
		case e := <-events:
			require.Equal(t, eventBookmark, e.Type, "sent again: %+v", e)
			continue
		case e := <-otherEvents:
			require.Equal(t, eventBookmark, e.Type, "another set's editor was sent %+v", e.Chart)
			continue
		case <-quiet:
		}
		break
	}
}

// change: the viewer may not change the chart release; the editor changes its version and values;
// what PATCH does not take is named.
func (s *chartsCallers) change(t *testing.T) {
	ctx, set, viewer, editor, otherEditor, web, registry := s.ctx, s.set, s.viewer, s.editor, s.otherEditor, s.web, s.registry
	// Changing it: the viewer may not; the editor changes the version and the values.
	code, out := callAs(t, viewer, http.MethodPatch, web.URL+"/charts/"+set+"/shop", map[string]any{"version": "1.3.0"}, nil)
	require.Equal(t, http.StatusForbidden, code, string(out))
	code, out = callAs(t, otherEditor, http.MethodPatch, web.URL+"/charts/"+set+"/shop", map[string]any{"version": "1.3.0"}, nil)
	require.Equal(t, http.StatusForbidden, code, string(out))
	code, out = callAs(t, editor, http.MethodPatch, web.URL+"/charts/"+set+"/shop", map[string]any{"version": "1.3.0", "values": map[string]any{"replicas": 5}}, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	rel, err := registry.Releases(set).Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "1.3.0", rel.Spec.Source.Chart.Repository.Version)
	require.JSONEq(t, `{"replicas":5}`, string(rel.Spec.Source.Chart.Values.Raw))
	require.Len(t, rel.Spec.Source.Chart.MemberValues, 1, "a PATCH of the version dropped the member values")
	// A field PATCH does not take is named with PATCH's fields (it answered with POST's).
	code, out = callAs(t, editor, http.MethodPatch, web.URL+"/charts/"+set+"/shop", map[string]any{"placement": "other"}, nil)
	require.Equal(t, http.StatusBadRequest, code, string(out))
	require.Contains(t, string(out), `the body is not a change of a chart release: version, values: json: unknown field \"placement\"`)
	put := map[string]any{"chart": map[string]any{"url": "https://charts.example.com", "chart": "shop", "version": "2.0.0"}, "placement": "web"}
	code, out = callAs(t, editor, http.MethodPut, web.URL+"/charts/"+set+"/shop", put, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	rel, err = registry.Releases(set).Get(ctx, "shop", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "https://charts.example.com", rel.Spec.Source.Chart.Repository.URL)
	require.Nil(t, rel.Spec.Source.Chart.Values, "PUT replaces")
	// A chart packaged in a Secret or a ConfigMap has no version to PATCH: 400, naming where it is.
	for kind, field := range map[string]string{"Secret": "secret", "ConfigMap": "configMap"} {
		code, out = callAs(t, editor, http.MethodPut, web.URL+"/charts/"+set+"/shop", map[string]any{"chart": map[string]any{field: "shop-chart"}, "placement": "web"}, nil)
		require.Equal(t, http.StatusOK, code, string(out))
		code, out = callAs(t, editor, http.MethodPatch, web.URL+"/charts/"+set+"/shop", map[string]any{"version": "2.1.0"}, nil)
		require.Equal(t, http.StatusBadRequest, code, string(out))
		require.Contains(t, string(out), "takes its chart from "+kind+" shop-chart, which has no version to change", kind)
	}
}

// remove: the editor removes it.
func (s *chartsCallers) remove(t *testing.T) {
	ctx, set, viewer, editor, otherEditor, web, registry := s.ctx, s.set, s.viewer, s.editor, s.otherEditor, s.web, s.registry
	// Removing it.
	for _, token := range []string{viewer, otherEditor} {
		code, out := callAs(t, token, http.MethodDelete, web.URL+"/charts/"+set+"/shop", nil, nil)
		require.Equal(t, http.StatusForbidden, code, string(out))
	}
	code, out := callAs(t, editor, http.MethodDelete, web.URL+"/charts/"+set+"/shop", nil, nil)
	require.Equal(t, http.StatusOK, code, string(out))
	_, err := registry.Releases(set).Get(ctx, "shop", metav1.GetOptions{})
	require.Error(t, err)
}

func make64(c byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return b
}

func toConditions(cs []chartCondition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range cs {
		out = append(out, metav1.Condition{Type: c.Type, Status: metav1.ConditionStatus(c.Status), Reason: c.Reason, Message: c.Message})
	}
	return out
}
