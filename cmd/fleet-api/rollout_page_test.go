package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// rolloutPage is what the parts of TestRolloutInABrowser share: a cluster set of three members
// (the fleet's two, and the registry's own API server as a third), a releases controller
// delivering to them, fleet-api on them, and a browser tab on its page.
type rolloutPage struct {
	ns       string
	web      string
	registry versioned.Interface
	members  []kubernetes.Interface
	tab      context.Context
}

// rolloutManifest is the ConfigMap every revision of the test's Release delivers to namespace
// default of each member.
const rolloutManifest = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dash-web"},"data":{"v":"1"}}`

// The dashboard shows a rollout as it goes, and acts on it as its caller: a Release in three
// waves, each waiting for approval, is approved wave by wave from the page and watched to the
// end on the members themselves; a revision whose first wave fails is shown failed, in red; undo
// from the page, confirmed first, puts revision 1 back; a caller who may only look sees the
// rollout and no button, and the registry refuses their POST.
func TestRolloutInABrowser(t *testing.T) {
	needsFleet(t)
	p := newRolloutPage(t)
	p.signIn(t, operatorToken)
	for wave := 1; wave <= 3; wave++ {
		p.approveFromPage(t, wave)
	}
	p.waitFor(t, `.cond-good[data-condition="Available"]`, 60*time.Second)
	// Available is written once every member is Ready; the revision is complete (status'
	// lastCompleteRevision) once its last wave has soaked, a status write later: wait for it.
	p.waitText(t, `tr[data-rollout="`+p.ns+`/dash"] .revisions`, "Revision 1 (current, last complete): 1 manifest", 60*time.Second)
	p.failedWave(t)
	p.undoFromPage(t)
	p.viewer(t)
	p.apiAnswers(t)
}

// newRolloutPage makes the set, starts the releases controller and fleet-api on it, creates the
// Release and opens the page.
func newRolloutPage(t *testing.T) *rolloutPage {
	ctx := testContext(t)
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(ctx, lf.Registry.Config))
	ns := fleettest.CopySet(t, lf)
	token, err := caller(ctx, "member-3-"+ns, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}, "")
	require.NoError(t, err)
	fleettest.RegisterServer(t, lf, ns, "member-3", lf.Registry.URL(), lf.Registry.Config.CAData, token)
	s, web := startAPI(t, ns)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	decisions := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	chosen := []decision.Chosen{{Cluster: types.NamespacedName{Namespace: ns, Name: "member-1"}},
		{Cluster: types.NamespacedName{Namespace: ns, Name: "member-2"}}, {Cluster: types.NamespacedName{Namespace: ns, Name: "member-3"}}}
	_, err = decision.Write(ctx, decisions, ns, "three", chosen, decision.WriteOptions{SchedulerName: "test"})
	require.NoError(t, err)
	ctrl, err := delivery.NewController(s.fleet, registry, kubernetes.NewForConfigOrDie(lf.Registry.Config), decisions,
		delivery.ControllerOptions{Namespace: ns, RetryAfter: time.Second})
	require.NoError(t, err)
	ctrlCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = ctrl.Run(ctrlCtx) }()
	t.Cleanup(func() { stop(); <-done })
	_, err = registry.ClusterregistryV1alpha1().Releases(ns).Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "dash"},
		Spec: v1alpha1.ReleaseSpec{Placement: v1alpha1.ReleasePlacement{Name: "three"}, TargetNamespace: "default",
			Rollout: &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutConcurrency, MaxConcurrency: ptr.To(intstr.FromInt32(1)), Approval: v1alpha1.ApprovalManual},
			Source:  v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{{Raw: []byte(rolloutManifest)}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = registry.ClusterregistryV1alpha1().Releases(ns).Delete(context.Background(), "dash", metav1.DeleteOptions{})
	})
	p := &rolloutPage{ns: ns, web: web.URL, registry: registry}
	for _, cfg := range []*rest.Config{lf.Members[0].Config, lf.Members[1].Config, lf.Registry.Config} {
		p.members = append(p.members, kubernetes.NewForConfigOrDie(cfg))
	}
	p.tab = openTab(t, web.URL+"/")
	return p
}

// openTab opens a headless Chromium tab on url, closed when the test ends.
func openTab(t *testing.T, url string) context.Context {
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser(t)), chromedp.NoSandbox, chromedp.WindowSize(1280, 900), browserTempDir(t))...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(allocCtx)
	t.Cleanup(cancelTab)
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(url)))
	return tab
}

// do runs steps in the tab within timeout.
func (p *rolloutPage) do(t *testing.T, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, timeout)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// waitFor waits until the page has an element sel.
func (p *rolloutPage) waitFor(t *testing.T, sel string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`document.querySelector(`+strconv.Quote(sel)+`) !== null`, chromedp.WithPollingTimeout(timeout))); err != nil {
		shown, _ := chromedp.Run(p.tab, chromedp.Evaluate[string](`document.body.innerText`))
		t.Fatalf("waiting for %s: %v; the page shows:\n%s", sel, err, shown)
	}
}

// waitText waits until the element sel's text holds want.
func (p *rolloutPage) waitText(t *testing.T, sel, want string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.tab, timeout)
	defer cancel()
	js := `(document.querySelector(` + strconv.Quote(sel) + `)?.textContent ?? "").includes(` + strconv.Quote(want) + `)`
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(timeout))); err != nil {
		t.Fatalf("waiting for %q in %s: %v; it says: %s", want, sel, err, p.text(t, sel))
	}
}

func (p *rolloutPage) text(t *testing.T, sel string) string {
	t.Helper()
	// Read in one step of the page's own: the rollout's panel is redrawn as the rollout moves,
	// and a node found, then read, may be gone in between.
	ctx, cancel := context.WithTimeout(p.tab, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+strconv.Quote(sel)+`)?.textContent ?? ""`))
	require.NoError(t, err, sel)
	return s
}

// openConfirm runs js, which clicks a button of the page, until the confirmation it opens is
// shown: the rollout's panel is redrawn as the rollout moves, and a click may land on a button
// just replaced, as a person's would.
func (p *rolloutPage) openConfirm(t *testing.T, js string) {
	t.Helper()
	p.do(t, 20*time.Second, chromedp.Poll[chromedp.Void](`(() => { if (!document.getElementById("confirm").open) { `+js+`; } `+
		`return document.getElementById("confirm").open; })()`, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(200*time.Millisecond)))
}

// wave is the selector of wave n of the Release's picture, in state.
func (p *rolloutPage) wave(n int, state string) string {
	return `tr[data-rollout="` + p.ns + `/dash"] .wave[data-wave="` + strconv.Itoa(n) + `"][data-state="` + state + `"]`
}

// signIn signs in with token and waits for the Release's picture.
func (p *rolloutPage) signIn(t *testing.T, token string) {
	p.do(t, 60*time.Second, chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("signin")))
	p.waitFor(t, `tr[data-rollout="`+p.ns+`/dash"] .wave`, 60*time.Second)
}

// approveFromPage approves wave n with the page's button, confirms, and waits for the wave to
// finish on the page and its member to hold the ConfigMap, while the next member does not yet.
func (p *rolloutPage) approveFromPage(t *testing.T, n int) {
	t.Helper()
	p.waitFor(t, p.wave(n, "awaiting approval"), 60*time.Second)
	button := `tr[data-rollout="` + p.ns + `/dash"] button[data-action="approve"]`
	p.waitFor(t, button, 30*time.Second)
	require.Equal(t, "Approve wave "+strconv.Itoa(n), strings.TrimSpace(p.text(t, button)))
	p.openConfirm(t, `document.querySelector(`+strconv.Quote(button)+`)?.click()`)
	require.Contains(t, p.text(t, "#confirm-text"), "member-"+strconv.Itoa(n)+" will get it")
	p.do(t, 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	p.waitFor(t, p.wave(n, "finished"), 60*time.Second)
	_, err := p.members[n-1].CoreV1().ConfigMaps("default").Get(testContext(t), "dash-web", metav1.GetOptions{})
	require.NoError(t, err, "member-%d after its wave", n)
	if n < 3 {
		_, err := p.members[n].CoreV1().ConfigMaps("default").Get(testContext(t), "dash-web", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "member-%d has the ConfigMap before its wave was approved: %v", n+1, err)
	}
}

// failedWave: a revision that member-1 cannot apply (a kind no member serves) fails its first
// wave, which the page shows failed, in red, with a red condition.
func (p *rolloutPage) failedWave(t *testing.T) {
	ctx := testContext(t)
	releases := p.registry.ClusterregistryV1alpha1().Releases(p.ns)
	// The delivery controller writes dash's status meanwhile: a conflict is retried.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rel, err := releases.Get(ctx, "dash", metav1.GetOptions{})
		if err != nil {
			return err
		}
		rel.Spec.Source.Manifests = append(rel.Spec.Source.Manifests, runtime.RawExtension{Raw: []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`)})
		_, err = releases.Update(ctx, rel, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	p.approveWave(t, 1)
	p.waitFor(t, p.wave(1, "failed"), 90*time.Second)
	red, err := chromedp.Run(p.tab, chromedp.Evaluate[string](`getComputedStyle(document.querySelector(`+strconv.Quote(p.wave(1, "failed"))+`)).borderTopColor`))
	require.NoError(t, err)
	require.Equal(t, "rgb(207, 34, 46)", red, "the failed wave's colour")
	require.Contains(t, p.text(t, p.wave(1, "failed")), "member-1 Failed")
	p.waitFor(t, `tr[data-release="`+p.ns+`/dash"] .cond-bad`, 30*time.Second)
	require.Contains(t, p.text(t, `tr[data-release="`+p.ns+`/dash"] .cond-bad`), "\u2717 ", "a bad condition says so in words, not colour alone")
}

// approveWave approves wave n of the current revision from the page.
func (p *rolloutPage) approveWave(t *testing.T, n int) {
	button := `tr[data-rollout="` + p.ns + `/dash"] button[data-action="approve"]`
	p.waitFor(t, p.wave(n, "awaiting approval"), 60*time.Second)
	p.openConfirm(t, `document.querySelector(`+strconv.Quote(button)+`)?.click()`)
	p.do(t, 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
}

// undoFromPage puts revision 1 back from the page: the confirmation says what will change, and
// the Release's spec is revision 1's again.
func (p *rolloutPage) undoFromPage(t *testing.T) {
	row := `tr[data-rollout="` + p.ns + `/dash"]`
	p.waitFor(t, row+` button[data-action="undo"]`, 30*time.Second)
	p.openConfirm(t, `(() => { const s = document.querySelector(`+strconv.Quote(row+" select")+`); if (s) s.value = "1"; `+
		`document.querySelector(`+strconv.Quote(row+` button[data-action="undo"]`)+`)?.click(); })()`)
	confirm := p.text(t, "#confirm-text")
	require.Contains(t, confirm, "Revision 1 (1 manifest) will be put back in place of revision 2 (2 manifests)")
	p.do(t, 10*time.Second, chromedp.Click(chromedp.ID("confirm-ok")))
	p.waitFor(t, row+` p[data-result="undo"].done`, 30*time.Second)
	require.Contains(t, p.text(t, row+` p[data-result="undo"]`), "rolled back to revision 1")
	rel, err := p.registry.ClusterregistryV1alpha1().Releases(p.ns).Get(testContext(t), "dash", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, rel.Spec.Source.Manifests, 1, "the Release's spec after undo")
}

// viewer: a caller who may only look at the set's Releases and their history sees the rollout,
// no button, and is refused by the registry when they POST anyway.
func (p *rolloutPage) viewer(t *testing.T) {
	ctx := testContext(t)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.RbacV1().Roles(p.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "release-viewer"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters", "releases", "releasestatusslices"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"controllerrevisions"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	token, err := caller(ctx, "viewer-"+p.ns, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "release-viewer"}, p.ns)
	require.NoError(t, err)
	p.do(t, 10*time.Second, chromedp.Click(chromedp.ID("logout")))
	p.signIn(t, token)
	row := `tr[data-rollout="` + p.ns + `/dash"]`
	p.waitFor(t, row+` .revisions li`, 30*time.Second)
	p.waitFor(t, row+` .actions .sub`, 30*time.Second)
	require.Contains(t, p.text(t, row+" .actions"), "changing it is not yours to do")
	buttons, err := chromedp.Run(p.tab, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(row+" button")+`).length`))
	require.NoError(t, err)
	require.Zero(t, buttons, "buttons shown to a viewer")
	code, body := callAs(t, token, http.MethodPost, p.web+"/releases/"+p.ns+"/dash/pause", map[string]any{}, nil)
	require.Equal(t, http.StatusForbidden, code, string(body))
	rel, err := p.registry.ClusterregistryV1alpha1().Releases(p.ns).Get(ctx, "dash", metav1.GetOptions{})
	require.NoError(t, err)
	require.False(t, rel.Spec.Suspend, "a viewer paused the Release")
}

// apiAnswers: the routes behind the page answer as the registry would, each error naming what is
// wrong: a wave that cannot be, a change the Release's state refuses, an action that does not
// exist, a body that is not one, a post from another site's page; a caller who may not list
// the set's Releases is told so.
func (p *rolloutPage) apiAnswers(t *testing.T) {
	base := p.web + "/releases/" + p.ns + "/dash/"
	code, body := callAs(t, operatorToken, http.MethodGet, base+"rollout", nil, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var view rolloutView
	require.NoError(t, json.Unmarshal(body, &view))
	require.Len(t, view.WaveList, 3)
	require.Equal(t, "member-1", view.WaveList[0].Members[0].Cluster)
	require.Equal(t, actions{Approve: true, Pause: true, Restart: true, Undo: true}, view.Actions)
	for _, c := range []struct {
		action string
		body   any
		header http.Header
		code   int
		says   string
	}{
		{"approve", map[string]any{"wave": -1}, nil, http.StatusBadRequest, "wave -1: want 0 (the next) or more"},
		{"undo", map[string]any{"toRevision": 99}, nil, http.StatusBadRequest, "unable to find revision 99 in its history; it has revisions"},
		{"resume", map[string]any{}, nil, http.StatusConflict, "release.clusterregistry.k8s.io/dash is not paused"},
		{"explode", map[string]any{}, nil, http.StatusNotFound, `"explode" is not a rollout action`},
		{"pause", map[string]any{"force": true}, nil, http.StatusBadRequest, `unknown field "force"`},
		{"pause", map[string]any{}, http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden, "is not a page of this server"},
		{"pause", map[string]any{}, http.Header{"Content-Type": {"text/plain"}}, http.StatusUnsupportedMediaType, "Content-Type application/json"},
	} {
		code, body := callAs(t, operatorToken, http.MethodPost, base+c.action, c.body, c.header)
		require.Equal(t, c.code, code, "%s: %s", c.action, body)
		var st metav1.Status
		require.NoError(t, json.Unmarshal(body, &st))
		require.Contains(t, st.Message, c.says, c.action)
	}
	rel, err := p.registry.ClusterregistryV1alpha1().Releases(p.ns).Get(testContext(t), "dash", metav1.GetOptions{})
	require.NoError(t, err)
	require.False(t, rel.Spec.Suspend, "a refused pause paused the Release")

	ctx := testContext(t)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err = kube.RbacV1().Roles(p.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "clusters-only"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	token, err := caller(ctx, "clusters-only-"+p.ns, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "clusters-only"}, p.ns)
	require.NoError(t, err)
	// A viewer of another cluster set: neither the rollout nor an action.
	elsewhere := viewerOf(t, fleettest.NewSet(t, lf), "rollout-elsewhere-"+p.ns)
	code, body = callAs(t, elsewhere, http.MethodGet, base+"rollout", nil, nil)
	require.Equal(t, http.StatusForbidden, code, string(body))
	code, body = callAs(t, elsewhere, http.MethodPost, base+"pause", map[string]any{}, nil)
	require.Equal(t, http.StatusForbidden, code, string(body))
	code, body = callAs(t, token, http.MethodGet, p.web+"/releases", nil, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var listed struct {
		Releases     []chartRelease    `json:"releases"`
		NotPermitted map[string]string `json:"notPermitted"`
	}
	require.NoError(t, json.Unmarshal(body, &listed))
	require.Empty(t, listed.Releases)
	require.Contains(t, listed.NotPermitted[p.ns], "cannot list resource \"releases\"", "the settled answer for a caller who may not list Releases")
	code, body = callAs(t, token, http.MethodGet, base+"rollout", nil, nil)
	require.Equal(t, http.StatusForbidden, code, string(body))
}
