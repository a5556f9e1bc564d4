package delivery

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func release(raw ...string) *v1alpha1.Release {
	r := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "fleet"}}
	for _, s := range raw {
		r.Spec.Source.Manifests = append(r.Spec.Source.Manifests, runtime.RawExtension{Raw: []byte(s)})
	}
	return r
}

func TestRenderLabelsOrdersAndHashes(t *testing.T) {
	rel := release(
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}`,
		`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"web"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","resourceVersion":"12","uid":"x"},"status":{"x":1}}`)
	b, err := Render(rel, Inputs{})
	require.NoError(t, err)
	var kinds []string
	for _, o := range b.Objects {
		kinds = append(kinds, o.GetKind())
		require.Equal(t, map[string]string{v1alpha1.ReleaseLabel: "web", v1alpha1.ReleaseNamespaceLabel: "fleet", v1alpha1.RevisionLabel: b.Revision}, o.GetLabels())
		require.Empty(t, o.GetResourceVersion(), "fields the member sets are not sent")
		_, has := o.Object["status"]
		require.False(t, has)
	}
	require.Equal(t, []string{"Namespace", "ConfigMap", "Deployment"}, kinds, "apply order")
	again, err := Render(rel, Inputs{})
	require.NoError(t, err)
	require.Equal(t, b.Revision, again.Revision, "the same objects, the same revision")

	rel.Spec.Drift = &v1alpha1.ReleaseDrift{Ignore: []v1alpha1.ReleaseIgnoredFields{{Group: "apps", Kind: "Deployment", Paths: []string{"/spec/replicas"}}}}
	ignored, err := Render(rel, Inputs{})
	require.NoError(t, err)
	require.NotEqual(t, b.Revision, ignored.Revision, "what is ignored is part of the revision")
	_, found, _ := unstructured.NestedInt64(ignored.Objects[2].Object, "spec", "replicas")
	require.False(t, found, "an ignored field is not applied")
}

func TestRenderNamesWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		name string
		rel  *v1alpha1.Release
		cm   *corev1.ConfigMap
		want string
	}{
		{"no kind", release(`{"apiVersion":"v1","metadata":{"name":"a"}}`), nil, "spec.source.manifests[0]: apiVersion and kind are required"},
		{"no name", release(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"generateName":"a-"}}`), nil, "spec.source.manifests[0]: ConfigMap: metadata.name is required"},
		{"a list", release(`{"apiVersion":"v1","kind":"List","items":[]}`), nil, "a List: give its items one by one"},
		{"the Release's own label", release(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"clusterregistry.k8s.io/release":"other"}}}`), nil,
			`spec.source.manifests[0]: ConfigMap "a": the label clusterregistry.k8s.io/release is the Release's own`},
		{"twice", release(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`), nil,
			"objects 1 and 2 are both ConfigMap /a"},
		{"a missing ConfigMap", &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "fleet"},
			Spec: v1alpha1.ReleaseSpec{Source: v1alpha1.ReleaseSource{ConfigMap: &v1alpha1.ReleaseConfigMapSource{Name: "app"}}}}, nil,
			"spec.source.configMap: ConfigMap app not found in namespace fleet"},
		{"bad YAML in a ConfigMap", &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "fleet"},
			Spec: v1alpha1.ReleaseSpec{Source: v1alpha1.ReleaseSource{ConfigMap: &v1alpha1.ReleaseConfigMapSource{Name: "app"}}}},
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: [\n"}},
			"ConfigMap app key a.yaml: document 2:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Render(c.rel, Inputs{ConfigMap: c.cm})
			require.ErrorContains(t, err, c.want)
			var se *SourceError
			require.ErrorAs(t, err, &se)
		})
	}
}

func TestRenderReadsAConfigMapInKeyOrder(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "fleet"},
		Spec: v1alpha1.ReleaseSpec{Source: v1alpha1.ReleaseSource{ConfigMap: &v1alpha1.ReleaseConfigMapSource{Name: "app"}}}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{
		"b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a2}\n",
	}}
	b, err := Render(rel, Inputs{ConfigMap: cm})
	require.NoError(t, err)
	var names []string
	for _, o := range b.Objects {
		names = append(names, o.GetName())
	}
	require.Equal(t, []string{"a", "a2", "b"}, names)
	rel.Spec.Source.ConfigMap.Key = "b.yaml"
	b, err = Render(rel, Inputs{ConfigMap: cm})
	require.NoError(t, err)
	require.Len(t, b.Objects, 1)
}
