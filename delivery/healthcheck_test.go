package delivery_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// spec.health judges a custom resource of a real CRD, which kstatus would call Current as soon as
// it exists: a Release of the CRD, and one of a Widget that depends on it, whose health is its
// status.phase. The test writes that status as the Widget's operator would (there is none). An
// expression that does not compile stalls the Release, naming it.
func TestHealthOfACustomResource(t *testing.T) {
	env := startDelivery(t)
	env.decide(t, "member-1")
	group := env.ns + ".example.com"
	crd := &apiextensionsv1.CustomResourceDefinition{TypeMeta: metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					XPreserveUnknownFields: ptr.To(true)}}}}}}
	releases := env.registry.ClusterregistryV1alpha1().Releases(env.ns)
	_, err := releases.Create(t.Context(), &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "crds"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: manifests(t, crd)}, Placement: v1alpha1.ReleasePlacement{Name: "web"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	widget := runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"%s/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`, group)}
	_, err = releases.Create(t.Context(), &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "widgets"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{widget}}, Placement: v1alpha1.ReleasePlacement{Name: "web"},
		DependsOn: []v1alpha1.ReleaseDependency{{Name: "crds"}},
		Health: []v1alpha1.ReleaseHealthCheck{{Group: group, Kind: "Widget",
			InProgress: `!has(self.status) || !has(self.status.phase) || self.status.phase == 'Starting'`,
			Failed:     `self.status.phase == 'Broken'`,
			Current:    `self.status.phase == 'Running'`}},
		Feedback: []v1alpha1.ReleaseFeedback{{Name: "phase", Group: group, Kind: "Widget", ObjectName: "w", JSONPath: "{.status.phase}"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	got := env.waitRelease(t, "widgets", "applied, in progress by its health", func(r *v1alpha1.Release) bool {
		return len(r.Status.Worst) == 1 && r.Status.Worst[0].Phase == v1alpha1.PhaseProgressing
	})
	t.Logf("widgets on member-1: %s %s", got.Status.Worst[0].Reason, got.Status.Worst[0].Message)
	require.Contains(t, got.Status.Worst[0].Message, "spec.health[0].inProgress holds")

	widgets := dynamic.NewForConfigOrDie(lf.Members[0].Config).Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace("default")
	setPhase := func(phase string) {
		w, err := widgets.Get(t.Context(), "w", metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(w.Object, phase, "status", "phase"))
		_, err = widgets.UpdateStatus(t.Context(), w, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	setPhase("Running")
	env.waitRelease(t, "widgets", "Ready by its health", func(r *v1alpha1.Release) bool { return r.Status.Ready == 1 })
	// spec.feedback read the phase into member-1's status, from the watch.
	slices := env.registry.ClusterregistryV1alpha1().ReleaseStatusSlices(env.ns)
	require.Eventually(t, func() bool {
		list, err := slices.List(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=widgets"})
		if err != nil || len(list.Items) != 1 || len(list.Items[0].Members) != 1 {
			return false
		}
		fb := list.Items[0].Members[0].Feedback
		return len(fb) == 1 && fb[0] == v1alpha1.ReleaseFeedbackValue{Name: "phase", Value: "Running"}
	}, 10*time.Second, 100*time.Millisecond, "the phase was not fed back")
	// Broken after it was Ready: Degraded by its health rule (no failure of the rollout: the
	// member finished its wave).
	setPhase("Broken")
	got = env.waitRelease(t, "widgets", "failed by its health", func(r *v1alpha1.Release) bool {
		return len(r.Status.Worst) == 1 && r.Status.Worst[0].Phase == v1alpha1.PhaseDegraded
	})
	require.Equal(t, "ObjectFailed", got.Status.Worst[0].Reason)
	require.Contains(t, got.Status.Worst[0].Message, "spec.health[0].failed holds")
	require.Equal(t, metav1.ConditionFalse, condition(got, v1alpha1.ReleaseStalled))

	requireStallsOnInvalidChecks(t, env, group)
	for _, name := range []string{"widgets", "crds"} {
		require.NoError(t, releases.Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
	require.Eventually(t, func() bool {
		list, err := releases.List(t.Context(), metav1.ListOptions{})
		return err == nil && len(list.Items) == 0
	}, 30*time.Second, 100*time.Millisecond, "the Releases were not removed")
}

// requireStallsOnInvalidChecks: Release widgets stalls, naming the field, on a feedback path that
// does not parse, then on a health expression that does not compile.
func requireStallsOnInvalidChecks(t *testing.T, env *deliveryEnv, group string) {
	t.Helper()
	env.updateRelease(t, env.ns, "widgets", func(cur *v1alpha1.Release) { cur.Spec.Feedback[0].JSONPath = "{.status.phase" })
	got := env.waitRelease(t, "widgets", "stalled by the path", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Reason == "InvalidFeedback"
	})
	require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled).Message, "spec.feedback[0] (phase)")
	env.updateRelease(t, env.ns, "widgets", func(cur *v1alpha1.Release) {
		cur.Spec.Feedback = nil
		cur.Spec.Health[0].Current = "self.status.phase =="
	})
	got = env.waitRelease(t, "widgets", "stalled by the expression", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Reason == "InvalidHealth"
	})
	require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled).Message, "spec.health[0].current (Widget."+group+")")
}
