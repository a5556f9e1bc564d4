package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// browser is the headless Chromium the page is tested in: $CHROMIUM, or one on PATH, as
// hack/install-chromium.sh (which hack/test.sh runs) finds or installs it. Without one the test
// fails, saying how to get one: it does not skip.
func browser(t *testing.T) string {
	t.Helper()
	for _, name := range []string{os.Getenv("CHROMIUM"), "chromium", "chromium-headless-shell", "chromium-browser", "google-chrome"} {
		if name == "" {
			continue
		}
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	t.Fatal("no Chromium: run hack/install-chromium.sh (it installs Debian's chromium package as root), or set CHROMIUM to a browser's path")
	return ""
}

// browserTempDir gives the browser a TMPDIR of the test's own, and fails the test if the browser
// left anything in the machine's: Chromium makes its profile's lock (a directory holding
// SingletonCookie and SingletonSocket) in TMPDIR and removes it only when it exits by itself, so
// a browser the test stops left one in /tmp at every run.
func browserTempDir(t *testing.T) chromedp.ExecAllocatorOption {
	t.Helper()
	leftBefore := chromiumLeftovers(t)
	dir := t.TempDir() // removed after the browser is stopped: cleanups run after the test's defers
	t.Cleanup(func() {
		for name := range chromiumLeftovers(t) {
			if !leftBefore[name] {
				t.Errorf("the browser left %s in %s", name, os.TempDir())
			}
		}
	})
	return chromedp.Env("TMPDIR=" + dir)
}

// chromiumLeftovers are the directories Chromium's profile locks leave in the machine's TMPDIR.
func chromiumLeftovers(t *testing.T) map[string]bool {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(os.TempDir(), "org.chromium.Chromium.*"))
	require.NoError(t, err)
	left := map[string]bool{}
	for _, m := range matches {
		left[filepath.Base(m)] = true
	}
	return left
}

// The dashboard in a real browser: after login with a token it shows every member the caller may
// see, shows a display name holding markup as text, turns a stopped member's caches stale
// without a reload, and fits a phone's screen. Screenshots of the hostile name and the stale
// member, and of the fleet current again, go to the test's temporary directory (README's
// docs/images/fleet-api.png comes from the demo's fleet: hack/demo.sh -screenshot).
func TestDashboardInABrowser(t *testing.T) {
	needsFleet(t)
	path := browser(t)
	ctx := testContext(t)
	_, web := startAPI(t)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	const markup = `<img id="injected" src="/x" onerror="document.title='owned'">Member <b>one</b>`
	_, err := registry.Patch(ctx, "member-1", types.MergePatchType, []byte(`{"spec":{"displayName":"`+
		`<img id=\"injected\" src=\"/x\" onerror=\"document.title='owned'\">Member <b>one</b>"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = registry.Patch(context.Background(), "member-1", types.MergePatchType, []byte(`{"spec":{"displayName":null}}`), metav1.PatchOptions{})
	})

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 720), browserTempDir(t))...)
	defer cancelAlloc()
	tab, cancelTab := chromedp.NewContext(allocCtx)
	defer cancelTab()
	// The first Run starts the browser for the tab's whole life; later steps get deadlines of their own.
	require.NoError(t, chromedp.Do(tab, chromedp.Navigate(web.URL+"/")))
	step := func(timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		stepCtx, cancel := context.WithTimeout(tab, timeout)
		defer cancel()
		require.NoError(t, chromedp.Do(stepCtx, steps...))
	}
	text := func(sel string) string {
		t.Helper()
		stepCtx, cancel := context.WithTimeout(tab, 10*time.Second)
		defer cancel()
		s, err := chromedp.Run(stepCtx, chromedp.TextContent(chromedp.CSS(sel)))
		require.NoError(t, err, sel)
		return s
	}
	row := func(member string) string { return `tr[data-member="` + lf.Namespace + `/` + member + `"]` }
	screenshot := func(path string) {
		t.Helper()
		shot, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, shot, 0o644))
		t.Logf("screenshot: %s", path)
	}
	d := &dashboard{ctx: ctx, registry: registry, markup: markup, tab: tab, step: step, text: text, row: row, screenshot: screenshot}
	d.signIn(t)
	d.capacity(t)
	d.releases(t)
	d.staleAndBack(t)
	d.ordinary(t)
	d.phone(t)
}

// dashboard is what the parts of TestDashboardInABrowser share, in order: one browser tab on fleet-
// api's page.
type dashboard struct {
	ctx        context.Context
	registry   crv1alpha1.ClusterInterface
	markup     string
	tab        context.Context
	step       func(timeout time.Duration, steps ...chromedp.Action[chromedp.Void])
	text       func(sel string) string
	row        func(member string) string
	screenshot func(path string)
}

// signIn: the operator signs in; the fleet is shown, a hostile display name as text.
func (d *dashboard) signIn(t *testing.T) {
	markup, tab, step, text, row := d.markup, d.tab, d.step, d.text, d.row
	step(60*time.Second, // a first paint under a loaded machine (CI shares 2 cores) takes a while
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.CSS(row("member-1"))),
		chromedp.WaitVisible(chromedp.CSS(row("member-2"))),
	)
	require.Contains(t, text(row("member-2")), "1 of 1 ready", "member-2's nodes")
	loginShown, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("login").offsetParent !== null`))
	require.NoError(t, err)
	require.False(t, loginShown, "the login form is still shown once the fleet is")
	require.Contains(t, text(row("member-1")), markup, "the display name, as text")
	injected, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("injected") !== null || document.title === "owned"`))
	require.NoError(t, err)
	require.False(t, injected, "a display name became markup in the page")
}

// capacity: a member's status.resources, once a capacity controller has written it, shows live
// in its row; a member without says it is not observed.
func (d *dashboard) capacity(t *testing.T) {
	cell := func(member string) string { return d.text(d.row(member) + ` td[data-label="Capacity"]`) }
	require.Contains(t, cell("member-1"), "not observed")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := d.registry.Get(d.ctx, "member-2", metav1.GetOptions{})
		if err != nil {
			return err
		}
		c.Status.Resources = &v1alpha1.ClusterResources{Nodes: 2, ReadyNodes: 1, LastObservedTime: metav1.Now(),
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Requested:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}}
		_, err = d.registry.UpdateStatus(d.ctx, c, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return strings.Contains(cell("member-2"), "cpu 1500m/4, memory 2Gi/16Gi") }, 30*time.Second, 200*time.Millisecond,
		"member-2's capacity not shown: %q", cell("member-2"))
	require.Contains(t, cell("member-2"), "1 of 2 Nodes schedulable")
}

// releases: Releases are shown live with each member's phase, as text however hostile.
func (d *dashboard) releases(t *testing.T) {
	ctx, tab, step, text := d.ctx, d.tab, d.step, d.text
	// A chart release appears in the releases view with each member's phase, live: what the
	// releases controller reports (written here as it would) is shown as text, however hostile.
	releases := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	rel, err := releases.Releases(lf.Namespace).Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: lf.Namespace},
		Spec: v1alpha1.ReleaseSpec{Placement: v1alpha1.ReleasePlacement{Name: "web"},
			Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{Repository: &v1alpha1.ReleaseChartRepository{
				URL: "oci://registry.example.com/charts/<b>shop</b>", Version: "~1.2"}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = releases.Releases(lf.Namespace).Delete(context.Background(), "shop", metav1.DeleteOptions{})
	})
	rel.Status = v1alpha1.ReleaseStatus{Members: 2, Ready: 1, Revision: "r1",
		Chart:      &v1alpha1.ReleaseChartStatus{Name: "shop", Version: "1.2.3", Digest: "sha256:0"},
		Conditions: []metav1.Condition{{Type: v1alpha1.ReleaseAvailable, Status: metav1.ConditionFalse, Reason: "RollingOut", Message: "1 of 2 ready", LastTransitionTime: metav1.Now()}}}
	rel, err = releases.Releases(lf.Namespace).UpdateStatus(ctx, rel, metav1.UpdateOptions{})
	require.NoError(t, err)
	const hostile = `<img id="injected2" src="/y" onerror="document.title='owned'">`
	_, err = releases.ReleaseStatusSlices(lf.Namespace).Create(ctx, &v1alpha1.ReleaseStatusSlice{ObjectMeta: metav1.ObjectMeta{Name: "shop-0", Namespace: lf.Namespace,
		Labels:          map[string]string{v1alpha1.ReleaseLabel: "shop"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))}},
		Members: []v1alpha1.ReleaseMemberStatus{
			{Cluster: "member-1", Phase: v1alpha1.PhaseReady, Revision: "r1", Feedback: []v1alpha1.ReleaseFeedbackValue{
				{Name: "version", Value: "1.2.3"}, {Name: "address", Value: "10.0.0.1:443"}}},
			{Cluster: "member-2", Phase: v1alpha1.PhaseFailed, Revision: "r1", Reason: "ApplyFailed", Message: hostile,
				Feedback: []v1alpha1.ReleaseFeedbackValue{{Name: "version", Value: hostile}}},
		}}, metav1.CreateOptions{})
	require.NoError(t, err)
	releaseRow := `tr[data-release="` + lf.Namespace + `/shop"]`
	step(30*time.Second, chromedp.Poll[chromedp.Void](`(document.querySelector('`+releaseRow+`') || {}).textContent?.includes("member-2: Failed")`,
		chromedp.WithPollingTimeout(30*time.Second)))
	shown := text(releaseRow)
	require.Contains(t, shown, "shop 1.2.3", "the version delivered")
	require.Contains(t, shown, "oci://registry.example.com/charts/<b>shop</b> ~1.2, Render mode", "the chart asked for, as text, and its mode")
	require.Contains(t, shown, "1 of 2")
	require.Contains(t, shown, "member-1: Ready at r1 · address=10.0.0.1:443, version=1.2.3", "what spec.feedback read, by name")
	require.Contains(t, shown, hostile, "a member's message, as text")
	require.Contains(t, shown, " · version="+hostile, "a member's feedback, as text")
	injected, err := chromedp.Run(tab, chromedp.Evaluate[bool](`document.getElementById("injected2") !== null || document.querySelector(`+strconv.Quote(releaseRow+" b")+`) !== null || document.title === "owned"`))
	require.NoError(t, err)
	require.False(t, injected, "a release's text became markup in the page")
	rel.Status.Ready = 2
	_, err = releases.Releases(lf.Namespace).UpdateStatus(ctx, rel, metav1.UpdateOptions{})
	require.NoError(t, err)
	step(30*time.Second, chromedp.Poll[chromedp.Void](`(document.querySelector('`+releaseRow+`') || {}).textContent?.includes("2 of 2")`,
		chromedp.WithPollingTimeout(30*time.Second)))
	// A Release of manifests is shown too, as what it delivers (the view showed chart releases only).
	_, err = releases.Releases(lf.Namespace).Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "site", Namespace: lf.Namespace},
		Spec: v1alpha1.ReleaseSpec{Placement: v1alpha1.ReleasePlacement{Name: "web"}, Source: v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{
			{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`)}, {Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`)}}}}},
		metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = releases.Releases(lf.Namespace).Delete(context.Background(), "site", metav1.DeleteOptions{})
	})
	siteRow := `tr[data-release="` + lf.Namespace + `/site"]`
	step(30*time.Second, chromedp.Poll[chromedp.Void](`(document.querySelector('`+siteRow+`') || {}).textContent?.includes("2 manifests")`,
		chromedp.WithPollingTimeout(30*time.Second)))
	require.Contains(t, text(siteRow), "inline")
}

// staleAndBack: a member that stops turns stale on the page, and synced again once back, with no
// reload.
func (d *dashboard) staleAndBack(t *testing.T) {
	step, row, screenshot := d.step, d.row, d.screenshot
	// The member stops: its caches turn stale on the page, with no reload.
	require.NoError(t, lf.Members[1].StopAPIServer())
	restarted := false
	defer func() {
		if !restarted {
			_ = lf.Members[1].StartAPIServer()
		}
	}()
	step(60*time.Second, chromedp.Poll[chromedp.Void](`(document.querySelector('`+row("member-2")+` .cache') || {}).textContent?.startsWith("Stale")`,
		chromedp.WithPollingTimeout(60*time.Second)))
	// The hostile name and the stale member are the test's to show, in its own output.
	screenshot(filepath.Join(t.TempDir(), "fleet-api-stale.png"))

	require.NoError(t, lf.Members[1].StartAPIServer())
	restarted = true
	step(90*time.Second, chromedp.Poll[chromedp.Void](`(document.querySelector('`+row("member-2")+` .cache') || {}).textContent?.startsWith("Synced")`,
		chromedp.WithPollingTimeout(90*time.Second)))
}

// ordinary: an ordinary fleet, every member current.
func (d *dashboard) ordinary(t *testing.T) {
	ctx, registry, step, row, screenshot := d.ctx, d.registry, d.step, d.row, d.screenshot
	// An ordinary fleet, every member current: the display name the stream sends is an ordinary one.
	_, err := registry.Patch(ctx, "member-1", types.MergePatchType, []byte(`{"spec":{"displayName":"Production, eu-west"}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	step(30*time.Second, chromedp.Poll[chromedp.Void](`(document.querySelector('`+row("member-1")+`') || {}).textContent?.includes("Production, eu-west")`,
		chromedp.WithPollingTimeout(30*time.Second)))
	screenshot(filepath.Join(t.TempDir(), "fleet-api.png"))
}

// phone: on a phone's screen each member is a card, nothing wider than the screen.
func (d *dashboard) phone(t *testing.T) {
	tab, step := d.tab, d.step
	// On a phone's screen each member is a card: no header row, nothing wider than the screen.
	step(10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	fits, err := chromedp.Run(tab, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector("thead")).display === "none" && `+
		`document.documentElement.scrollWidth <= window.innerWidth`))
	require.NoError(t, err)
	require.True(t, fits, "the page does not fit a phone's screen")
}
