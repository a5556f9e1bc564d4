package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// authProxy stands for the authenticating reverse proxy Optikon's UI runs behind (as Kubernetes
// Dashboard is run): it adds the signed-in user's bearer token to each request it forwards to
// fleet-api, and passes preflights on as they are (a browser sends none with them). It keeps
// what it forwarded, for the test to look at.
type authProxy struct {
	mu   sync.Mutex
	seen []string // "METHOD path?query origin"
}

func (p *authProxy) start(t *testing.T, target, token string) *httptest.Server {
	to, err := url.Parse(target)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(to)
		if r.In.Method != http.MethodOptions {
			r.Out.Header.Set("Authorization", "Bearer "+token)
		}
		p.mu.Lock()
		p.seen = append(p.seen, r.In.Method+" "+r.In.URL.RequestURI()+" "+r.In.Header.Get("Origin"))
		p.mu.Unlock()
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv
}

// Optikon's UI as Optikon runs it: a page of another origin, sending no credentials, through an
// authenticating proxy, makes Optikon's own requests (testdata/optikon: the same URLs, methods,
// form fields and JSON fields read): it lists the clusters, installs a chart on the clusters
// labelled tier=edge, sees it listed per cluster with its revision, upgrades it (the same labels,
// as Optikon's form sends them), and deletes it from the region=west clusters; each step checked
// on the members themselves.
func TestOptikonUIThroughAProxy(t *testing.T) {
	needsFleet(t)
	ui := httptest.NewServer(http.FileServer(http.Dir("testdata/optikon")))
	t.Cleanup(ui.Close)
	_, _, base := optikonSet(t, ui.URL)
	proxy := &authProxy{}
	api := proxy.start(t, base, operatorToken)
	dir := t.TempDir()
	for _, v := range []string{"0.1.0", "0.2.0"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, "web-"+v+".tgz"), helloChart(t, v), 0o600))
	}
	tab := openTab(t, ui.URL+"/index.html?api="+url.QueryEscape(api.URL))
	page := &rolloutPage{tab: tab}
	page.waitFor(t, `#clustable tr#member-1 td.pods`, 60*time.Second)
	require.Equal(t, "Green", page.text(t, `#clustable tr#member-2 td.health`))

	members := []kubernetes.Interface{kubernetes.NewForConfigOrDie(lf.Members[0].Config), kubernetes.NewForConfigOrDie(lf.Members[1].Config)}
	deploy := func(button, version string) {
		t.Helper()
		page.do(t, 20*time.Second, chromedp.SetValue(chromedp.ID("chartName"), "web"), chromedp.SetValue(chromedp.ID("chartNamespace"), "optikon-ui"),
			chromedp.SetValue(chromedp.ID("chartLabels"), "tier=edge"),
			chromedp.SetUploadFiles(chromedp.ID("chartLoc"), []string{filepath.Join(dir, "web-"+version+".tgz")}), chromedp.Click(chromedp.ID(button)))
	}
	atVersion := func(revision int, chart string) {
		t.Helper()
		for _, m := range []string{"member-1", "member-2"} {
			page.waitFor(t, `#releaseTable tr#web`+m+` td.version`, 90*time.Second)
			page.do(t, 90*time.Second, chromedp.Poll[chromedp.Void](`document.querySelector("#releaseTable tr#web`+m+` td.version").textContent === "`+strconv.Itoa(revision)+`" && `+
				`document.querySelector("#releaseTable tr#web`+m+` td.chartVersion").textContent === "`+chart+`"`, chromedp.WithPollingTimeout(90*time.Second)))
		}
		for i, m := range members {
			cm, err := m.CoreV1().ConfigMaps("optikon-ui").Get(testContext(t), "web-config", metav1.GetOptions{})
			require.NoError(t, err, "member-%d", i+1)
			require.Equal(t, chart, cm.Data["version"], "member-%d", i+1)
		}
	}
	deploy("postRelease", "0.1.0")
	atVersion(1, "0.1.0")
	deploy("updateRelease", "0.2.0")
	atVersion(2, "0.2.0")

	page.do(t, 10*time.Second, chromedp.SetValue(chromedp.ID("delInput"), "web"), chromedp.SetValue(chromedp.ID("delChartLabels"), "region=west"), chromedp.Click(chromedp.ID("deleteRelease")))
	page.do(t, 90*time.Second, chromedp.Poll[chromedp.Void](`document.querySelector("#releaseTable tr#webmember-2") === null`, chromedp.WithPollingTimeout(90*time.Second)))
	require.Eventually(t, func() bool {
		_, err := members[1].CoreV1().ConfigMaps("optikon-ui").Get(testContext(t), "web-config", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 200*time.Millisecond, "web left member-2")
	_, err := members[0].CoreV1().ConfigMaps("optikon-ui").Get(testContext(t), "web-config", metav1.GetOptions{})
	require.NoError(t, err, "member-1 (region=east) lost web")
	require.Equal(t, "2", page.text(t, `#releaseTable tr#webmember-1 td.version`))
	proxy.requireCrossOrigin(t, ui.URL)
}

// requireCrossOrigin checks the proxy forwarded the page's requests, from its origin: the
// preflights for PUT and DELETE included.
func (p *authProxy) requireCrossOrigin(t *testing.T, origin string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The UI's deploy, update and delete carry ?labels=, as Optikon's do.
	want := map[string]bool{"GET /v0/clusters": false, "GET /v0/releases": false, "POST /v0/releases?labels=tier=edge": false,
		"OPTIONS /v0/releases/web?labels=tier=edge": false, "PUT /v0/releases/web?labels=tier=edge": false,
		"OPTIONS /v0/releases/web?labels=region=west": false, "DELETE /v0/releases/web?labels=region=west": false}
	for _, s := range p.seen {
		for k := range want {
			if s == k+" "+origin {
				want[k] = true
			}
		}
	}
	for k, seen := range want {
		require.True(t, seen, "the page sent no %s from %s through the proxy", k, origin)
	}
}

// A page of an allowed origin, through a proxy that passes its own Host on (as oauth2-proxy does
// by default), to a fleet-api not told that Host (--allowed-host): the page reads why it was
// refused, for a simple request and for one a preflight precedes, instead of the browser's
// "blocked by CORS policy" alone. A page of another origin still reads nothing, and no
// preflight of its is answered.
func TestRefusedHostIsReadableByAnAllowedOrigin(t *testing.T) {
	needsFleet(t)
	blank := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "<!doctype html><title>ui</title>")
	})
	ui := httptest.NewServer(blank)
	t.Cleanup(ui.Close)
	stranger := httptest.NewServer(blank)
	t.Cleanup(stranger.Close)
	_, web := startAPIWith(t, []string{ui.URL})
	to, err := url.Parse(web.URL)
	require.NoError(t, err)
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(to)
		r.Out.Host = r.In.Host // the proxy's own name, not fleet-api's
		if r.In.Method != http.MethodOptions {
			r.Out.Header.Set("Authorization", "Bearer "+operatorToken)
		}
	}})
	t.Cleanup(proxy.Close)
	// The proxy's Host is its own address, another port than fleet-api's: not one fleet-api serves.
	api := proxy.URL
	fetch := func(tab context.Context, init string) string {
		t.Helper()
		out, err := chromedp.Run(tab, chromedp.Evaluate[string](`fetch(`+strconv.Quote(api+"/v0/clusters")+`, `+init+`).then(async r => r.status + " " + await r.text()).catch(e => "blocked: " + e)`, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return out
	}
	tab := openTab(t, ui.URL)
	for _, init := range []string{`{}`, `{method: "PUT", headers: {"Content-Type": "application/json"}, body: "{}"}`} {
		got := fetch(tab, init)
		require.True(t, strings.HasPrefix(got, "400 "), "%s: %s", init, got)
		require.Contains(t, got, "give --allowed-host to serve it", "%s: the page reads why", init)
		require.Contains(t, got, `"code": "400"`, "%s: /v0's refusal is not Optikon's APIResponse", init)
	}
	other := openTab(t, stranger.URL)
	for _, init := range []string{`{}`, `{method: "PUT", headers: {"Content-Type": "application/json"}, body: "{}"}`} {
		got := fetch(other, init)
		require.True(t, strings.HasPrefix(got, "blocked: "), "a page of another origin read the answer (%s): %s", init, got)
	}
}
