package helmrelease_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/helmrelease"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// server is the package's one API server, a member as far as Helm is concerned.
var server *localfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	lf, err := localfleet.Start(ctx, localfleet.Options{Bare: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	server = lf
	code := m.Run()
	_ = lf.Stop()
	os.Exit(code)
}

func chartAt(t testing.TB, version string) []byte {
	b, err := chartrender.Package("web", map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: web\nversion: " + version + "\n",
		"values.yaml": "greeting: hi\n",
		"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n" +
			"  greeting: {{ .Values.greeting | quote }}\n  chart: {{ .Chart.Version | quote }}\n",
	})
	require.NoError(t, err)
	return b
}

// Helm's own install, upgrade, rollback and uninstall on a real API server: the release is
// Helm's (helm ls, as Helm's List action, shows it; its records are Helm's Secrets); concurrent
// operations on one member each have their own Configuration (the race detector watches); the
// member is discovered once for all of them, and again only when told to.
func TestHelmActionsOnAMember(t *testing.T) {
	realservers.Required(t)
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	ctx := t.Context()
	ns := "helm-actions"
	kube := kubernetes.NewForConfigOrDie(server.Registry.Config)
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	member, discoveries := countedMember(t, server.Registry.Config)
	getter := member.Getter(ns)
	opts := helmrelease.Options{Timeout: time.Minute}
	greeting := func(rel string) string {
		cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, rel+"-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		require.NoError(t, err)
		return cm.Data["greeting"] + "@" + cm.Data["chart"]
	}
	s := &helmActions{ctx: ctx, ns: ns, kube: kube, member: member, discoveries: discoveries, getter: getter, opts: opts, greeting: greeting}
	s.installAndList(t)
	s.concurrentAndLifecycle(t)
}

// helmActions is what the parts of TestHelmActionsOnAMember share, in order.
type helmActions struct {
	ctx         context.Context
	ns          string
	kube        *kubernetes.Clientset
	member      *helmrelease.Member
	discoveries *atomic.Int64
	getter      genericclioptions.RESTClientGetter
	opts        helmrelease.Options
	greeting    func(rel string) string
}

// installAndList: a release installed as Helm installs it, and listed as helm ls lists it.
func (s *helmActions) installAndList(t *testing.T) {
	ctx, ns, kube, getter, opts, greeting := s.ctx, s.ns, s.kube, s.getter, s.opts, s.greeting
	r, err := helmrelease.Apply(ctx, getter, "shop", ns, chartAt(t, "0.1.0"), map[string]any{"greeting": "hello"}, opts)
	require.NoError(t, err)
	require.Equal(t, helmrelease.Result{Installed: true, Revision: 1, Status: "deployed"}, r)
	require.Equal(t, "hello@0.1.0", greeting("shop"))
	records, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=shop"})
	require.NoError(t, err)
	require.Len(t, records.Items, 1, "Helm's record of the release")

	r, err = helmrelease.Apply(ctx, getter, "shop", ns, chartAt(t, "0.2.0"), map[string]any{"greeting": "hey"}, opts)
	require.NoError(t, err)
	require.Equal(t, helmrelease.Result{Revision: 2, Status: "deployed"}, r)
	require.Equal(t, "hey@0.2.0", greeting("shop"))

	// helm ls, as Helm's own List action sees the member.
	cfg := action.NewConfiguration()
	require.NoError(t, cfg.Init(getter, ns, "secret"))
	listed, err := action.NewList(cfg).Run()
	require.NoError(t, err)
	require.Len(t, listed, 1)
	a, err := release.NewAccessor(listed[0])
	require.NoError(t, err)
	require.Equal(t, "shop", a.Name())
	require.Equal(t, 2, a.Version())
}

// concurrentAndLifecycle: concurrent operations on the one member discover it once; then upgrade,
// rollback and uninstall.
func (s *helmActions) concurrentAndLifecycle(t *testing.T) {
	ctx, ns, member, discoveries, getter, opts, greeting := s.ctx, s.ns, s.member, s.discoveries, s.getter, s.opts, s.greeting
	// Concurrent operations on the one member, each with its own Configuration (one release
	// each: the releases controller never runs two operations on one release at once).
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			_, err := helmrelease.Apply(ctx, member.Getter(ns), fmt.Sprintf("app-%d", i), ns, chartAt(t, "0.1.0"), map[string]any{"greeting": fmt.Sprint(i)}, opts)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, discoveries.Load(), "the member was discovered more than once")
	member.Invalidate()
	_, found, err := helmrelease.Status(ctx, getter, "shop", ns, opts)
	require.NoError(t, err)
	require.True(t, found)
	_, err = helmrelease.Apply(ctx, getter, "shop", ns, chartAt(t, "0.2.0"), map[string]any{"greeting": "again"}, opts)
	require.NoError(t, err)
	require.EqualValues(t, 2, discoveries.Load(), "Invalidate did not make the next operation discover")

	require.NoError(t, helmrelease.Rollback(ctx, getter, "shop", ns, 1, opts))
	require.Equal(t, "hello@0.1.0", greeting("shop"))
	require.NoError(t, helmrelease.Uninstall(ctx, getter, "shop", ns, opts))
	require.Empty(t, greeting("shop"))
	_, found, err = helmrelease.Status(ctx, getter, "shop", ns, opts)
	require.NoError(t, err)
	require.False(t, found)
	require.NoError(t, helmrelease.Uninstall(ctx, getter, "shop", ns, opts), "a release that is gone is no error")
	for i := range 8 {
		require.NoError(t, helmrelease.Uninstall(ctx, getter, fmt.Sprintf("app-%d", i), ns, opts))
	}
}

// A member that answers nothing costs an operation only its Timeout.
func TestAnUnansweringMemberCostsItsTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	member, err := helmrelease.NewMember(&rest.Config{Host: "https://" + l.Addr().String(), TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, nil, nil)
	require.NoError(t, err)
	getter := member.Getter("default")
	start := time.Now()
	_, err = helmrelease.Apply(t.Context(), getter, "shop", "default", chartAt(t, "0.1.0"), nil, helmrelease.Options{Timeout: 2 * time.Second})
	require.Error(t, err)
	require.Less(t, time.Since(start), 10*time.Second, "the operation outlived its timeout")
}

// Apply with a Revision makes no Helm revision of what the release already has deployed at
// that Revision (a caller that restarted applies everything again), and makes one for anything
// else: another Revision, or the same after a rollback to a revision of another.
func TestApplyAtTheSameRevisionDoesNothing(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	ns := "helm-revisions"
	kube := kubernetes.NewForConfigOrDie(server.Registry.Config)
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	member, err := helmrelease.NewMember(server.Registry.Config, nil, nil)
	require.NoError(t, err)
	getter := member.Getter(ns)
	apply := func(revision, greeting string) helmrelease.Result {
		t.Helper()
		r, err := helmrelease.Apply(ctx, getter, "shop", ns, chartAt(t, "0.1.0"), map[string]any{"greeting": greeting}, helmrelease.Options{Timeout: time.Minute, Revision: revision})
		require.NoError(t, err)
		return r
	}
	records := func() int {
		list, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=shop"})
		require.NoError(t, err)
		return len(list.Items)
	}
	require.Equal(t, helmrelease.Result{Installed: true, Revision: 1, Status: "deployed"}, apply("aaaa", "hello"))
	latest, err := kube.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.shop.v1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "aaaa", latest.Labels[helmrelease.RevisionLabel], "the revision is not on Helm's record")
	require.Equal(t, helmrelease.Result{Unchanged: true, Revision: 1, Status: "deployed"}, apply("aaaa", "hello"))
	require.Equal(t, 1, records())
	require.Equal(t, helmrelease.Result{Revision: 2, Status: "deployed"}, apply("bbbb", "hey"))
	require.Equal(t, helmrelease.Result{Unchanged: true, Revision: 2, Status: "deployed"}, apply("bbbb", "hey"))
	require.Equal(t, 2, records())
	// Rolled back to revision 1 (by hand, or Helm on a failed upgrade): bbbb is no longer there.
	require.NoError(t, helmrelease.Rollback(ctx, getter, "shop", ns, 1, helmrelease.Options{Timeout: time.Minute}))
	require.Equal(t, helmrelease.Result{Revision: 4, Status: "deployed"}, apply("bbbb", "hey"))
	require.Equal(t, 4, records())
	// Without a Revision, as before: always an upgrade. Helm carries bbbb's label to it, but
	// not its values: bbbb is applied again.
	r, err := helmrelease.Apply(ctx, getter, "shop", ns, chartAt(t, "0.1.0"), map[string]any{"greeting": "by hand"}, helmrelease.Options{Timeout: time.Minute})
	require.NoError(t, err)
	require.Equal(t, helmrelease.Result{Revision: 5, Status: "deployed"}, r)
	require.Equal(t, helmrelease.Result{Revision: 6, Status: "deployed"}, apply("bbbb", "hey"))
	// Another chart version at the same Revision (a caller's mistake): applied.
	r, err = helmrelease.Apply(ctx, getter, "shop", ns, chartAt(t, "0.2.0"), map[string]any{"greeting": "hey"}, helmrelease.Options{Timeout: time.Minute, Revision: "bbbb"})
	require.NoError(t, err)
	require.Equal(t, helmrelease.Result{Revision: 7, Status: "deployed"}, r)
	_, err = helmrelease.Apply(ctx, getter, "shop", ns, chartAt(t, "0.1.0"), nil, helmrelease.Options{Revision: "not a label value!"})
	require.ErrorContains(t, err, `Options.Revision "not a label value!" is not a label value`)
	require.NoError(t, helmrelease.Uninstall(ctx, getter, "shop", ns, helmrelease.Options{Timeout: time.Minute}))
}

// countedMember is the member reached with config, and the count of full discoveries (GET
// /apis) its shared discovery makes.
func countedMember(tb testing.TB, config *rest.Config) (*helmrelease.Member, *atomic.Int64) {
	counting, n := countingDiscoveries(config)
	dc, err := discovery.NewDiscoveryClientForConfig(counting)
	require.NoError(tb, err)
	member, err := helmrelease.NewMember(config, memory.NewMemCacheClient(dc), nil)
	require.NoError(tb, err)
	return member, n
}

// countingDiscoveries is config counting the full discoveries (GET /apis) made with it.
func countingDiscoveries(config *rest.Config) (*rest.Config, *atomic.Int64) {
	var n atomic.Int64
	out := rest.CopyConfig(config)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.TrimSuffix(req.URL.Path, "/") == "/apis" {
				n.Add(1)
			}
			return rt.RoundTrip(req)
		})
	})
	return out, &n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
