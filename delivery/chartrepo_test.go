package delivery_test

import (
	"encoding/base64"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/testkit/chartserve"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// regionalAt is regionalChart at version, greeting by default with greeting.
func regionalAt(version, greeting string) map[string]string {
	files := maps.Clone(regionalChart)
	files["Chart.yaml"] = "apiVersion: v2\nname: regional\nversion: " + version + "\n"
	files["values.yaml"] = "greeting: " + greeting + "\nregion: none\ncluster: none\n"
	return files
}

// A chart from an OCI registry that wants a token, with a pull Secret of the set: delivered to
// the members, a range resolved to the newest match, and a new version rolled out when the
// Release asks for it; status names the chart's version and digest. The registry's writers and a
// Release's writer cannot turn the controller elsewhere: a repository that redirects is refused
// (the host it names hears nothing), and a pull Secret's credentials go only to the hosts it
// names. A stalled Release names why, without the Secret's contents, and applies nothing.
func TestReleaseOfAChartFromARepository(t *testing.T) {
	reg := chartserve.NewOCIRegistry(t)
	v1 := packagedChart(t, "regional", regionalAt("0.1.0", "hi"))
	url := reg.Push(t, v1)
	v2 := packagedChart(t, "regional", regionalAt("0.2.0", "hello"))
	reg.Push(t, v2)
	reg.RequireToken("puller", "pull-s3cret")
	elsewhere := chartserve.NewHTTPRepository(t)
	redirecting := chartserve.NewHTTPRepository(t)
	redirecting.Handle = func(w http.ResponseWriter, r *http.Request) bool {
		http.Redirect(w, r, elsewhere.URL()+"/index.yaml", http.StatusFound)
		return true
	}
	fetcher := chartrepo.NewFetcher(chartrepo.Options{RootCAs: reg.RootCAs()})
	env := startDeliveryWith(t, fleettest.CopySet(t, lf), nil, func(o *delivery.ControllerOptions) { o.Charts = fetcher })
	t.Cleanup(func() { // before the Controller's own cleanup looks for goroutines left
		for _, srv := range []*httptest.Server{reg.Server, elsewhere.Server, redirecting.Server} {
			srv.Close()
		}
		fetcher.CloseIdleConnections()
	})
	kubeReg := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	appNS := "app-chart-repo"
	env.appNamespace(t, appNS)
	auth := base64.StdEncoding.EncodeToString([]byte("puller:pull-s3cret"))
	_, err := kubeReg.CoreV1().Secrets(env.ns).Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "pull"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"` + reg.Host() + `":{"auth":"` + auth + `"}}}`)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	env.decide(t, "member-1", "member-2")
	release := func(name string, repo v1alpha1.ReleaseChartRepository) {
		_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), &v1alpha1.Release{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.ns},
			Spec: v1alpha1.ReleaseSpec{
				Source:          v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{Repository: &repo}},
				Placement:       v1alpha1.ReleasePlacement{Name: "web"},
				TargetNamespace: appNS,
			}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	greeting := func(member, release string) string {
		cm, err := env.members[member].CoreV1().ConfigMaps(appNS).Get(t.Context(), release+"-config", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		require.NoError(t, err)
		return cm.Data["greeting"]
	}

	release("shop", v1alpha1.ReleaseChartRepository{URL: url, Version: "~0.1", SecretRef: &v1alpha1.ReleaseSecretReference{Name: "pull"}})
	got := env.waitRelease(t, "shop", "0.1.0 ready on both", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	require.Equal(t, &v1alpha1.ReleaseChartStatus{Name: "regional", Version: "0.1.0", Digest: digestOf(v1)}, got.Status.Chart)
	require.Equal(t, "hi", greeting("member-1", "shop"))
	require.Equal(t, "hi", greeting("member-2", "shop"))

	got.Spec.Source.Chart.Repository.Version = "0.2.0"
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Update(t.Context(), got, metav1.UpdateOptions{})
	require.NoError(t, err)
	got = env.waitRelease(t, "shop", "0.2.0 ready on both", func(r *v1alpha1.Release) bool {
		return r.Status.Chart != nil && r.Status.Chart.Version == "0.2.0" && r.Status.Ready == 2 && r.Status.ObservedGeneration == r.Generation
	})
	require.Equal(t, digestOf(v2), got.Status.Chart.Digest)
	require.Equal(t, "hello", greeting("member-1", "shop"))
	require.Equal(t, "hello", greeting("member-2", "shop"))

	requireRepositoriesRefused(t, env, redirecting, elsewhere, auth, release, greeting)
}

// requireRepositoriesRefused: a repository that redirects, and a Release that sends the set's
// pull Secret to another host, stall Release redirected and borrowed; the other host hears
// nothing, and neither Release changes a member.
func requireRepositoriesRefused(t *testing.T, env *deliveryEnv, redirecting, elsewhere *chartserve.HTTPRepository, auth string,
	release func(name string, repo v1alpha1.ReleaseChartRepository), greeting func(member, release string) string) {
	t.Helper()
	// The attacker's repository redirects: refused, and the host it names hears nothing.
	release("redirected", v1alpha1.ReleaseChartRepository{URL: redirecting.URL(), Chart: "regional"})
	// A Release that sends the set's pull Secret to another host: its credentials are for the
	// registry's host only.
	release("borrowed", v1alpha1.ReleaseChartRepository{URL: elsewhere.URL(), Chart: "regional", SecretRef: &v1alpha1.ReleaseSecretReference{Name: "pull"}})
	stalled := func(name string) string {
		r := env.waitRelease(t, name, "stalled", func(r *v1alpha1.Release) bool {
			c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
			return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "ChartUnavailable"
		})
		return meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled).Message
	}
	msg := stalled("redirected")
	require.Contains(t, msg, "redirect refused")
	require.Contains(t, msg, elsewhere.URL()+"/index.yaml")
	msg = stalled("borrowed")
	require.Contains(t, msg, "Secret "+env.ns+"/pull has no auths entry for "+strings.TrimPrefix(elsewhere.Server.URL, "https://"))
	require.NotContains(t, msg, "pull-s3cret")
	require.NotContains(t, msg, auth)
	time.Sleep(time.Second)
	require.Zero(t, elsewhere.Requests.Load(), "the other host was asked")
	for _, m := range []string{"member-1", "member-2"} {
		require.Empty(t, greeting(m, "redirected"), m)
		require.Empty(t, greeting(m, "borrowed"), m)
	}
	require.Equal(t, "hello", greeting("member-1", "shop"), "a stalled Release changed another's objects")
}

func digestOf(archive []byte) string {
	ch, err := chartrender.Load(archive)
	if err != nil {
		panic(err)
	}
	return ch.Digest
}
