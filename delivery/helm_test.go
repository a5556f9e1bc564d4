package delivery_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/localfleet"
)

// A chart in Helm mode: Helm's own install on each member, with each member's values, so the
// release is Helm's there (its record in Helm's Secrets, helm ls shows it) and the chart's hooks
// run; a new value is Helm's upgrade (revision 2); deleting the Release is helm uninstall on
// every member.
func TestReleaseOfAChartInHelmMode(t *testing.T) {
	env := startDelivery(t)
	appNS := "helm-" + env.ns // made by the Release (createNamespace), as helm install --create-namespace would
	kubeReg := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	env.labelRegions(t)
	files := maps.Clone(regionalChart)
	files["templates/hook.yaml"] = `apiVersion: v1
kind: ConfigMap
metadata: {name: {{ .Release.Name }}-installed, annotations: {helm.sh/hook: post-install}}
data: {by: hook}
`
	_, err := kubeReg.CoreV1().ConfigMaps(env.ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "helm-chart"},
		BinaryData: map[string][]byte{"chart.tgz": packagedChart(t, "regional", files)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	values, err := json.Marshal(map[string]any{"greeting": "hello"})
	require.NoError(t, err)
	env.decide(t, "member-1", "member-2")
	// member-1 is reached with a token of an account of its own, rotated below.
	oldToken := env.useMemberToken(t, "member-1", "helm-before-rotation")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{
			Mode:         v1alpha1.ChartModeHelm,
			ConfigMap:    &v1alpha1.ReleaseChartConfigMap{Name: "helm-chart"},
			Values:       &runtime.RawExtension{Raw: values},
			MemberValues: []v1alpha1.ReleaseMemberValue{{Path: "region", From: v1alpha1.MemberValueLabel, Key: "topology.kubernetes.io/region"}},
		}},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		CreateNamespace: true,
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "shop", "installed by Helm on both", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	require.Equal(t, "regional", got.Status.Chart.Name)
	records := func(member string) int {
		list, err := env.members[member].CoreV1().Secrets(appNS).List(t.Context(), metav1.ListOptions{LabelSelector: "owner=helm,name=shop"})
		require.NoError(t, err)
		return len(list.Items)
	}
	for name, region := range map[string]string{"member-1": "eu-west", "member-2": "us-east"} {
		ns, err := env.members[name].CoreV1().Namespaces().Get(t.Context(), appNS, metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, env.ns+"/shop", ns.Annotations[delivery.CreatedByAnnotation], "the namespace on %s", name)
		cm, err := env.members[name].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shop-config", metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, "hello", cm.Data["greeting"])
		require.Equal(t, region, cm.Data["region"])
		require.Equal(t, "Helm", cm.Labels["app.kubernetes.io/managed-by"], "Helm's object, not the Release's")
		_, err = env.members[name].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shop-installed", metav1.GetOptions{})
		require.NoError(t, err, "the post-install hook did not run on %s", name)
		require.Equal(t, 1, records(name), "Helm's record of the release on %s", name)
	}

	// member-1's credentials rotate, and the old account is deleted (its token refused): Helm's
	// operations there go on with the new ones, as every other request to the member does.
	env.useMemberToken(t, "member-1", "helm-after-rotation")
	require.NoError(t, env.members["member-1"].CoreV1().ServiceAccounts("default").Delete(t.Context(), env.ns+"-helm-before-rotation", metav1.DeleteOptions{}))
	withOld := rest.AnonymousClientConfig(lf.Members[0].Config)
	withOld.BearerToken = oldToken
	require.Eventually(t, func() bool {
		_, err := kubernetes.NewForConfigOrDie(withOld).CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 100*time.Millisecond, "the old token is still accepted")

	// New values: Helm's upgrade, a second revision on each member.
	got.Spec.Source.Chart.Values = &runtime.RawExtension{Raw: []byte(`{"greeting":"hey"}`)}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Update(t.Context(), got, metav1.UpdateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "shop", "upgraded on both", func(r *v1alpha1.Release) bool {
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == 2
	})
	for _, name := range []string{"member-1", "member-2"} {
		cm, err := env.members[name].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shop-config", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, "hey", cm.Data["greeting"])
		require.Equal(t, 2, records(name), "Helm's two revisions on %s", name)
	}

	restartThenUninstall(t, env, appNS, records)
}

// restartThenUninstall: a controller that restarts finds Release shop deployed at its revision
// on each member and writes nothing; deleting the Release is helm uninstall on each member.
func restartThenUninstall(t *testing.T, env *deliveryEnv, appNS string, records func(member string) int) {
	t.Helper()
	// A controller that restarts finds the release deployed at its revision on each member:
	// no Helm revision, and no write anywhere (status included: it has not changed, and the
	// restart comes a second later, so that a member's lastApplied taken anew would show).
	time.Sleep(1100 * time.Millisecond)
	env.stop()
	// Its debug log says each Helm operation, one found unchanged included.
	var reached sync.Map // member -> true, once Helm found the release unchanged there
	env = startDeliveryWith(t, env.ns, nil, func(o *delivery.ControllerOptions) {
		o.Logger = funcr.New(func(_, args string) {
			if strings.Contains(args, `"helm release applied"`) && strings.Contains(args, `"unchanged"=true`) {
				for _, name := range []string{"member-1", "member-2"} {
					if strings.Contains(args, "/"+name+`"`) {
						reached.Store(name, true)
					}
				}
			}
		}, funcr.Options{Verbosity: 1})
	})
	require.Eventually(t, func() bool {
		_, one := reached.Load("member-1")
		_, two := reached.Load("member-2")
		return one && two
	}, 60*time.Second, 50*time.Millisecond, "the restarted controller did not reach both members")
	time.Sleep(time.Second) // a status written after the pass would be written by now
	for _, name := range []string{"member-1", "member-2"} {
		require.Equal(t, 2, records(name), "a Helm revision of what %s had, after a restart", name)
	}
	require.Zero(t, env.ctrl.Writes(), "the restarted controller wrote what was there")

	// Deleting the Release is helm uninstall on each member.
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "shop", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Get(t.Context(), "shop", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 60*time.Second, 100*time.Millisecond, "the Release was not finalized")
	for _, name := range []string{"member-1", "member-2"} {
		_, err := env.members[name].CoreV1().ConfigMaps(appNS).Get(t.Context(), "shop-config", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "%s kept the release's object: %v", name, err)
		require.Zero(t, records(name), "%s kept Helm's record", name)
	}
}

// Helm mode's readiness is Helm's wait, judged against the members' real controllers: a chart's
// Deployment is Ready once its Pods run on the simulated Nodes; a bad image fails Helm's wait
// within the member's timeout, the member is Failed and the rollout stops at its wave, the
// second member keeping the image it runs.
func TestHelmModeWaitsForRealDeployments(t *testing.T) {
	env := startDelivery(t)
	appNS := "helm-wait"
	env.appNamespace(t, appNS)
	kubeReg := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"values.yaml": "image: registry.example/app:1\n",
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: {{ .Release.Name }}}
spec:
  replicas: 2
  selector: {matchLabels: {app: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: {{ .Release.Name }}}}
    spec: {containers: [{name: app, image: {{ .Values.image | quote }}}]}
`,
	}
	_, err := kubeReg.CoreV1().ConfigMaps(env.ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-chart"},
		BinaryData: map[string][]byte{"chart.tgz": packagedChart(t, "app", files)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{
			Mode: v1alpha1.ChartModeHelm, ConfigMap: &v1alpha1.ReleaseChartConfigMap{Name: "app-chart"}}},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
		Rollout:         &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutGroups},
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "app", "Ready on both, as Helm's wait says", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	for name, kube := range env.members {
		d, err := kube.AppsV1().Deployments(appNS).Get(t.Context(), "app", metav1.GetOptions{})
		require.NoError(t, err, name)
		require.Equal(t, int32(2), d.Status.AvailableReplicas, "%s: Ready before its Pods ran", name)
	}

	env.updateRelease(t, env.ns, "app", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Chart.Values = &runtime.RawExtension{Raw: []byte(`{"image":"` + localfleet.UnpullableRegistry + `/app:2"}`)}
	})
	got := env.waitRelease(t, "app", "stopped at the first wave", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Reason == "TooManyFailures"
	})
	require.Equal(t, "member-1", got.Status.Worst[0].Cluster)
	require.Equal(t, v1alpha1.PhaseFailed, got.Status.Worst[0].Phase)
	t.Logf("member-1: %s: %s", got.Status.Worst[0].Reason, got.Status.Worst[0].Message)
	d, err := env.members["member-2"].AppsV1().Deployments(appNS).Get(t.Context(), "app", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "registry.example/app:1", d.Spec.Template.Spec.Containers[0].Image, "the second wave got the bad image")
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "app", metav1.DeleteOptions{}))
}

// useMemberToken makes the cluster set's Secret of member hold a token of a new cluster-admin
// account there, named account (prefixed with the set), so that a test can rotate it and revoke
// the old one without touching the local fleet's own account. It returns the token.
func (e *deliveryEnv) useMemberToken(t *testing.T, member, account string) string {
	t.Helper()
	kube := e.members[member]
	name := e.ns + "-" + account
	_, err := kube.CoreV1().ServiceAccounts("default").Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(t.Context(), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	secrets := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(e.ns)
	secret, err := secrets.Get(t.Context(), member+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	secret.Data["token"] = []byte(tr.Status.Token)
	_, err = secrets.Update(t.Context(), secret, metav1.UpdateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}
