package delivery_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// packagedChart is chartrender.Package, failing the test on an error.
func packagedChart(t testing.TB, name string, files map[string]string) []byte {
	t.Helper()
	b, err := chartrender.Package(name, files)
	require.NoError(t, err)
	return b
}

var regionalChart = map[string]string{
	"Chart.yaml":  "apiVersion: v2\nname: regional\nversion: 0.1.0\n",
	"values.yaml": "greeting: hi\nregion: none\ncluster: none\n",
	"templates/config.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-config}
data:
  greeting: {{ .Values.greeting | quote }}
  region: {{ .Values.region | quote }}
  cluster: {{ .Values.cluster | quote }}
`,
}

// appNamespace makes namespace name on every member, for the Releases to target.
func (e *deliveryEnv) appNamespace(t *testing.T, name string) {
	t.Helper()
	for _, kube := range e.members {
		_, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
}

// labelRegions labels member-1's Cluster of the set eu-west and member-2's us-east
// (topology.kubernetes.io/region), for member values to take.
func (e *deliveryEnv) labelRegions(t *testing.T) {
	t.Helper()
	for name, region := range map[string]string{"member-1": "eu-west", "member-2": "us-east"} {
		_, err := e.registry.ClusterregistryV1alpha1().Clusters(e.ns).Patch(t.Context(), name, types.MergePatchType,
			[]byte(`{"metadata":{"labels":{"topology.kubernetes.io/region":"`+region+`"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
}

// A chart in a ConfigMap of the set, delivered in render mode with values of its own and values
// from each member's Cluster (a label, the name): each member gets its region's settings, as
// plain objects the Release owns (nothing of Helm's on the member). A chart with a hook is
// refused, naming the hook, and nothing already delivered is removed.
func TestReleaseOfAChart(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-chart"
	kubeReg := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	env.appNamespace(t, appNS)
	env.labelRegions(t)
	_, err := kubeReg.CoreV1().ConfigMaps(env.ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "regional-chart"},
		BinaryData: map[string][]byte{"chart.tgz": packagedChart(t, "regional", regionalChart)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	values, err := json.Marshal(map[string]any{"greeting": "hello"})
	require.NoError(t, err)
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{
			ConfigMap: &v1alpha1.ReleaseChartConfigMap{Name: "regional-chart"},
			Values:    &runtime.RawExtension{Raw: values},
			MemberValues: []v1alpha1.ReleaseMemberValue{
				{Path: "region", From: v1alpha1.MemberValueLabel, Key: "topology.kubernetes.io/region"},
				{Path: "cluster", From: v1alpha1.MemberValueName},
			},
		}},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "shop", "the chart ready on both", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	for name, region := range map[string]string{"member-1": "eu-west", "member-2": "us-east"} {
		cm, err := env.members[name].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shop-config", metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, map[string]string{"greeting": "hello", "region": region, "cluster": name}, cm.Data, name)
		require.Equal(t, got.Status.Revision, cm.Labels[v1alpha1.RevisionLabel])
		secrets, err := env.members[name].CoreV1().Secrets(appNS).List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm"})
		require.NoError(t, err)
		require.Empty(t, secrets.Items, "render mode keeps no Helm release on the member")
	}

	// A chart the controller refuses stalls the Release, saying why; nothing delivered is removed.
	refused := func(what, file, template, says string) {
		t.Helper()
		files := maps.Clone(regionalChart)
		files[file] = template
		cm, err := kubeReg.CoreV1().ConfigMaps(env.ns).Get(t.Context(), "regional-chart", metav1.GetOptions{})
		require.NoError(t, err)
		cm.BinaryData["chart.tgz"] = packagedChart(t, "regional", files)
		_, err = kubeReg.CoreV1().ConfigMaps(env.ns).Update(t.Context(), cm, metav1.UpdateOptions{})
		require.NoError(t, err)
		env.waitRelease(t, "shop", "stalled on "+what, func(r *v1alpha1.Release) bool {
			c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
			return c != nil && c.Reason == "InvalidSource" && strings.Contains(c.Message, says)
		})
		time.Sleep(time.Second)
		_, err = env.members["member-1"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shop-config", metav1.GetOptions{})
		require.NoError(t, err, "a refused chart (%s) removed what was delivered", what)
	}
	// A hook: refused before any member, naming it.
	refused("the hook", "templates/migrate.yaml", `apiVersion: batch/v1
kind: Job
metadata: {name: migrate, annotations: {helm.sh/hook: pre-upgrade}}
spec: {template: {spec: {restartPolicy: Never, containers: [{name: m, image: registry.invalid/m:1}]}}}
`, "regional/templates/migrate.yaml (Job migrate, on pre-upgrade)")
	// A template that would make 190 MiB in the controller: refused by the render's bounds.
	refused("the render's bound", "templates/greedy.yaml",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: greedy}\ndata: {x: {{ repeat 100000000 \"ab\" | quote }}}\n",
		"chart regional: rendering function repeat would make 190 MiB, over 32 MiB")
}
