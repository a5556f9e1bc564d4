package delivery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A chart in a Secret of the set, its values from a ConfigMap and a Secret of the set, merged in order under the inline
// values; an optional one that is missing adds nothing. A change to the ConfigMap is delivered
// without touching the Release. A Secret that is not YAML stalls the Release, naming it and
// never quoting it, and removes nothing.
func TestChartValuesFromConfigMapsAndSecrets(t *testing.T) {
	env := startDelivery(t)
	appNS := "app-values"
	kubeReg := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	env.appNamespace(t, appNS)
	cms := kubeReg.CoreV1().ConfigMaps(env.ns)
	secrets := kubeReg.CoreV1().Secrets(env.ns)
	_, err := secrets.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "chart"},
		Data: map[string][]byte{"chart.tgz": packagedChart(t, "regional", regionalChart)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shop-values"},
		Data: map[string]string{"values.yaml": "greeting: from-configmap\nregion: configmap-region\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = secrets.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "shop-secret-values"},
		Data: map[string][]byte{"region.yaml": []byte("region: secret-region\n")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	env.decide(t, "member-1")
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
			Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{
				Secret: &v1alpha1.ReleaseChartConfigMap{Name: "chart"},
				ValuesFrom: []v1alpha1.ReleaseValuesReference{
					{Kind: "ConfigMap", Name: "shop-values"},
					{Kind: "Secret", Name: "shop-secret-values", Key: "region.yaml"},
					{Kind: "ConfigMap", Name: "not-there", Optional: true},
				},
				Values: &runtime.RawExtension{Raw: []byte(`{"cluster":"inline"}`)},
			}},
			Placement: v1alpha1.ReleasePlacement{Name: "web"}, TargetNamespace: appNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	data := func() map[string]string {
		cm, err := env.members["member-1"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shop-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		require.NoError(t, err)
		return cm.Data
	}
	env.waitRelease(t, "shop", "ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	require.Equal(t, map[string]string{"greeting": "from-configmap", "region": "secret-region", "cluster": "inline"}, data())

	// The ConfigMap changes: delivered, the Release untouched.
	cm, err := cms.Get(t.Context(), "shop-values", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["values.yaml"] = "greeting: changed\n"
	_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return data()["greeting"] == "changed" }, 30*time.Second, 100*time.Millisecond, "the ConfigMap's new values were not delivered")

	// A Secret that is not YAML: stalled, named, not quoted; nothing removed.
	s, err := secrets.Get(t.Context(), "shop-secret-values", metav1.GetOptions{})
	require.NoError(t, err)
	s.Data["region.yaml"] = []byte("password: [s3cret-unclosed")
	_, err = secrets.Update(t.Context(), s, metav1.UpdateOptions{})
	require.NoError(t, err)
	// Secrets are read when the Release is worked on: the ConfigMap's touch brings it now.
	cm, err = cms.Get(t.Context(), "shop-values", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data["values.yaml"] = "greeting: changed-again\n"
	_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "shop", "stalled on the Secret", func(r *v1alpha1.Release) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "InvalidSource"
	})
	msg := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled).Message
	require.Contains(t, msg, "spec.source.chart.valuesFrom[1] (Secret shop-secret-values key region.yaml)")
	require.NotContains(t, msg, "s3cret")
	require.Equal(t, "changed", data()["greeting"], "a stalled Release changed what was delivered")
}
