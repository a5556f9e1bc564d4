package tunnel_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/gobuild"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// Delivery reaches a member in its own network through the tunnel, unchanged above the access
// layer: a Release's objects are applied there, an edit by hand is corrected from the watch that
// runs through the tunnel, a new revision prunes what it no longer has, an undo puts the old one
// back, and deleting the Release removes its objects; a chart in Helm mode is installed there by
// Helm's own client, through the same tunnel, and uninstalled.
func TestDeliveryThroughTheTunnel(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 4*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	host, agentProc, token := r.tunnelledMember(t, ns, memberAddress(t))
	d := startDelivery(t, ns, r)
	member := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	appNS := "app-" + ns

	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: objects(t,
			&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "web-config"}, Data: map[string]string{"color": "blue"}},
			&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "web-extra"}})},
		Placement: v1alpha1.ReleasePlacement{Name: "web"}, TargetNamespace: appNS, CreateNamespace: true,
	}}
	_, err := d.releases.Create(ctx, rel, metav1.CreateOptions{})
	require.NoError(t, err)
	first := d.wait(t, "web", "delivered through the tunnel", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	color := func() string {
		cm, err := member.CoreV1().ConfigMaps(appNS).Get(ctx, "web-config", metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		return cm.Data["color"]
	}
	require.Equal(t, "blue", color())

	t.Run("diff release through the tunnel", func(t *testing.T) { diffThroughTheTunnel(t, r, first) })

	// Drift, seen by the watch through the tunnel.
	editByHand(t, member, appNS, "red")
	require.Eventually(t, func() bool { return color() == "blue" }, time.Minute, 100*time.Millisecond, "the edit on the member was not corrected")

	outer := t // what runs on after the subtest: the new agent, the new server
	t.Run("a broken tunnel deletes nothing", func(t *testing.T) {
		brokenTunnel(t, r, member, appNS, func() {
			require.NoError(t, agentProc.Process.Kill()) // the agent restarts
			require.Eventually(t, func() bool { return !r.server.Connected(host) }, time.Minute, 50*time.Millisecond)
			time.Sleep(3 * time.Second) // the controller's turns meanwhile find the member unreachable
			r.startAgent(outer, token, host)
			r.waitConnected(t, host)
			r.restart(outer) // and then the tunnel server does
			r.waitConnected(t, host)
		})
		d.wait(t, "web", "Ready again", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	})

	// A new revision without web-extra prunes it; undo brings the first back.
	d.update(t, "web", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = objects(t, &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "web-config"}, Data: map[string]string{"color": "green"}})
	})
	d.wait(t, "web", "the second revision", func(r *v1alpha1.Release) bool {
		return r.Status.Revision != first.Status.Revision && r.Status.Ready == 1
	})
	require.Equal(t, "green", color())
	_, err = member.CoreV1().ConfigMaps(appNS).Get(ctx, "web-extra", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "web-extra was not pruned: %v", err)
	history, err := delivery.History(ctx, kubernetes.NewForConfigOrDie(lf.Registry.Config), first)
	require.NoError(t, err)
	require.Len(t, history, 2)
	d.update(t, "web", func(cur *v1alpha1.Release) { *cur = *delivery.Undo(cur, history[0]) })
	d.wait(t, "web", "undone", func(r *v1alpha1.Release) bool {
		return r.Status.Revision == first.Status.Revision && r.Status.Ready == 1
	})
	require.Equal(t, "blue", color())
	_, err = member.CoreV1().ConfigMaps(appNS).Get(ctx, "web-extra", metav1.GetOptions{})
	require.NoError(t, err, "undo did not put web-extra back")

	require.NoError(t, d.releases.Delete(ctx, "web", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := member.CoreV1().ConfigMaps(appNS).Get(ctx, "web-config", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "deleting the Release left its objects on the member")

	t.Run("Helm mode", func(t *testing.T) { helmThroughTheTunnel(t, d, member, "helm-"+ns) })
}

// editByHand sets web-config's color on the member, as someone with kubectl there would.
func editByHand(t *testing.T, member kubernetes.Interface, appNS, color string) {
	ctx := fleettest.Context(t, time.Minute)
	cm, err := member.CoreV1().ConfigMaps(appNS).Get(ctx, "web-config", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["color"] = color
	_, err = member.CoreV1().ConfigMaps(appNS).Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// brokenTunnel breaks the tunnel as breakIt says and checks, on the member itself, that what was
// delivered to appNS was neither deleted nor made again meanwhile: the same uids, and no delete
// or add seen by a watch of the member's ConfigMaps there.
func brokenTunnel(t *testing.T, r *rig, member kubernetes.Interface, appNS string, breakIt func()) {
	ctx := fleettest.Context(t, 3*time.Minute)
	uids := func() map[string]types.UID {
		list, err := member.CoreV1().ConfigMaps(appNS).List(ctx, metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel})
		require.NoError(t, err)
		out := map[string]types.UID{}
		for _, cm := range list.Items {
			out[cm.Name] = cm.UID
		}
		return out
	}
	before := uids()
	require.Len(t, before, 2)
	list, err := member.CoreV1().ConfigMaps(appNS).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := member.CoreV1().ConfigMaps(appNS).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	breakIt()
	require.Equal(t, before, uids(), "what was delivered was deleted or made again")
	for {
		select {
		case ev := <-w.ResultChan():
			require.NotContains(t, []watch.EventType{watch.Deleted, watch.Added}, ev.Type, "the member saw %s of %v", ev.Type, ev.Object)
			continue
		default:
		}
		break
	}
}

// diffThroughTheTunnel runs clusterregistry diff release -f on an edit of rel: a dry run on the
// member through the tunnel shows the change, exits 1, and changes nothing there.
func diffThroughTheTunnel(t *testing.T, r *rig, rel *v1alpha1.Release) {
	bin := filepath.Join(gobuild.Commands(t, "..", "./cmd/clusterregistry"), "clusterregistry")
	edit := rel.DeepCopy()
	edit.ManagedFields, edit.Status = nil, v1alpha1.ReleaseStatus{}
	edit.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Release"}
	edit.Spec.Source.Manifests = objects(t,
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "web-config"}, Data: map[string]string{"color": "purple"}},
		&corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "web-extra"}})
	data, err := json.Marshal(edit)
	require.NoError(t, err)
	file := writeFile(t, t.TempDir(), "web.json", data)
	cmd := exec.Command(bin, append([]string{"--kubeconfig=" + lf.Registry.Kubeconfig, "-n", rel.Namespace, "diff", "release", "-f", file}, r.trustFlags(t, "diff")...)...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode(), "diff found no change, or failed: %s", out)
	require.Contains(t, string(out), "+  color: purple")
	require.Contains(t, string(out), "-  color: blue")
	cm, err := kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().ConfigMaps(rel.Spec.TargetNamespace).Get(context.Background(), "web-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "blue", cm.Data["color"], "the dry run changed the member")
}

// helmThroughTheTunnel installs a chart in Helm mode on member-1 and uninstalls it.
func helmThroughTheTunnel(t *testing.T, d *deliveryRig, member kubernetes.Interface, appNS string) {
	ctx := fleettest.Context(t, 2*time.Minute)
	chart, err := chartrender.Package("hello", map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: hello\nversion: 0.1.0\n",
		"values.yaml": "greeting: hi\n",
		"templates/config.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-config}\n" +
			"data: {greeting: {{ .Values.greeting | quote }}}\n",
	})
	require.NoError(t, err)
	registry := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err = registry.CoreV1().ConfigMaps(d.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hello-chart"},
		BinaryData: map[string][]byte{"chart.tgz": chart}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: d.ns}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{
			Mode: v1alpha1.ChartModeHelm, ConfigMap: &v1alpha1.ReleaseChartConfigMap{Name: "hello-chart"},
			Values: &runtime.RawExtension{Raw: []byte(`{"greeting":"through the tunnel"}`)},
		}},
		Placement: v1alpha1.ReleasePlacement{Name: "web"}, TargetNamespace: appNS, CreateNamespace: true,
	}}
	_, err = d.releases.Create(ctx, rel, metav1.CreateOptions{})
	require.NoError(t, err)
	d.wait(t, "shop", "installed by Helm through the tunnel", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	cm, err := member.CoreV1().ConfigMaps(appNS).Get(ctx, "shop-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "through the tunnel", cm.Data["greeting"])
	require.Equal(t, "Helm", cm.Labels["app.kubernetes.io/managed-by"])
	records, err := member.CoreV1().Secrets(appNS).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=shop"})
	require.NoError(t, err)
	require.Len(t, records.Items, 1, "Helm's record of the release on the member")

	require.NoError(t, d.releases.Delete(ctx, "shop", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := member.CoreV1().ConfigMaps(appNS).Get(ctx, "shop-config", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "helm uninstall through the tunnel left the chart's objects")
}

// deliveryRig is a delivery Controller on a cluster set whose members it reaches through a rig,
// its decision "web" choosing member-1.
type deliveryRig struct {
	ns       string
	releases interface {
		Create(context.Context, *v1alpha1.Release, metav1.CreateOptions) (*v1alpha1.Release, error)
		Get(context.Context, string, metav1.GetOptions) (*v1alpha1.Release, error)
		Update(context.Context, *v1alpha1.Release, metav1.UpdateOptions) (*v1alpha1.Release, error)
		Delete(context.Context, string, metav1.DeleteOptions) error
	}
}

func startDelivery(t *testing.T, ns string, r *rig) *deliveryRig {
	t.Helper()
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	decisions := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	fleet := multicluster.NewFleet(registry, resolverFor(t, r.dialer()), multicluster.FleetOptions{Namespaces: []string{ns}})
	ctrl, err := delivery.NewController(fleet, registry, kubernetes.NewForConfigOrDie(lf.Registry.Config), decisions, delivery.ControllerOptions{
		Namespace: ns, MemberTimeout: 10 * time.Second, RetryAfter: 2 * time.Second, Fresh: func() bool { return fleet.Status().Fresh() }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, fleet.Start(ctx))
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		fleet.Stop()
	})
	chosen := []decision.Chosen{{Cluster: types.NamespacedName{Namespace: ns, Name: "member-1"}}}
	_, err = decision.Write(fleettest.Context(t, time.Minute), decisions, ns, "web", chosen, decision.WriteOptions{SchedulerName: "test"})
	require.NoError(t, err)
	return &deliveryRig{ns: ns, releases: registry.ClusterregistryV1alpha1().Releases(ns)}
}

func (d *deliveryRig) wait(t *testing.T, name, what string, ok func(*v1alpha1.Release) bool) *v1alpha1.Release {
	t.Helper()
	var got *v1alpha1.Release
	assert.Eventually(t, func() bool {
		var err error
		got, err = d.releases.Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && got.Status.ObservedGeneration == got.Generation && ok(got)
	}, 2*time.Minute, 100*time.Millisecond, "Release: %s", what)
	if t.Failed() {
		t.Fatalf("Release %s: %+v", name, got.Status)
	}
	return got
}

func (d *deliveryRig) update(t *testing.T, name string, change func(*v1alpha1.Release)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := d.releases.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(cur)
		_, err = d.releases.Update(context.Background(), cur, metav1.UpdateOptions{})
		return err
	}))
}

// objects are a Release's manifests.
func objects(t *testing.T, objs ...runtime.Object) []runtime.RawExtension {
	t.Helper()
	var out []runtime.RawExtension
	for _, o := range objs {
		raw, err := json.Marshal(o)
		require.NoError(t, err)
		out = append(out, runtime.RawExtension{Raw: raw})
	}
	return out
}
