package delivery

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Overrides patch the rendered objects of the members they choose, strategic merge by default
// (a Deployment's containers merge by name), JSON merge for a kind the scheme does not know, and
// JSON patch; a member's revision is the Release's, or begins with it; a patch that does not
// apply is an *OverrideError naming the override and the object.
func TestOverrides(t *testing.T) {
	deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},` +
		`"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"registry.example/web:1"},{"name":"sidecar","image":"registry.example/side:1"}]}}}}`
	widget := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"color":"blue"}}`
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{{Raw: []byte(deploy)}, {Raw: []byte(widget)}}},
		Overrides: []v1alpha1.ReleaseOverride{
			{Name: "eu", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}, Patches: []v1alpha1.ReleasePatch{
				{Group: "apps", Kind: "Deployment", Patch: "spec:\n  replicas: 3\n  template:\n    spec:\n      containers:\n      - name: web\n        image: eu.registry.example/web:1\n"},
				{Group: "example.com", Kind: "Widget", Name: "w", Patch: `{"spec":{"color":"green"}}`},
			}},
			{Name: "big", CEL: `"size" in cluster.labels && cluster.labels["size"] == "big"`, Patches: []v1alpha1.ReleasePatch{
				{Group: "example.com", Kind: "Widget", Type: v1alpha1.PatchJSON, Patch: `[{"op":"replace","path":"/spec/size","value":9}]`},
			}},
		}}}
	rel.Spec.Overrides[1].CEL = `cluster.labels["size"] ==`
	_, err := Render(rel, Inputs{})
	require.ErrorContains(t, err, "spec.overrides[1] (big).cel: ")
	rel.Spec.Overrides[1].CEL = `"size" in cluster.labels && cluster.labels["size"] == "big"`
	b, err := Render(rel, Inputs{})
	require.NoError(t, err)
	cluster := func(l map[string]string) *v1alpha1.Cluster {
		return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Labels: l}}
	}

	us := cluster(map[string]string{"region": "us"})
	require.Equal(t, b.Revision, b.revisionFor(us))
	objs, err := b.objectsFor(us)
	require.NoError(t, err)
	require.Equal(t, float64(1), nested(t, objs[0], "spec", "replicas"))

	eu := cluster(map[string]string{"region": "eu"})
	euBig := cluster(map[string]string{"region": "eu", "size": "big"})
	require.True(t, strings.HasPrefix(b.revisionFor(eu), b.Revision+"-"))
	require.NotEqual(t, b.revisionFor(eu), b.revisionFor(euBig))
	require.True(t, ofRevision(b.revisionFor(euBig), b.Revision))
	objs, err = b.objectsFor(euBig)
	require.NoError(t, err)
	require.Equal(t, float64(3), nested(t, objs[0], "spec", "replicas"))
	containers, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "template", "spec", "containers")
	require.Len(t, containers, 2, "strategic merge keeps the sidecar")
	require.Equal(t, "eu.registry.example/web:1", containers[0].(map[string]any)["image"])
	require.Equal(t, "green", nested(t, objs[1], "spec", "color"))
	require.Equal(t, float64(9), nested(t, objs[1], "spec", "size"))
	require.Equal(t, b.revisionFor(euBig), objs[0].GetLabels()[v1alpha1.RevisionLabel])
	require.Equal(t, b.Revision, b.Objects[0].GetLabels()[v1alpha1.RevisionLabel], "the Bundle's own objects were changed")
	require.Equal(t, float64(1), nested(t, b.Objects[0], "spec", "replicas"), "the Bundle's own objects were changed")

	// A patch that does not apply stalls the Release, naming the override and the object.
	rel.Spec.Overrides[1].Patches[0].Patch = `[{"op":"remove","path":"/spec/nothing"}]`
	_, err = Render(rel, Inputs{})
	var oe *OverrideError
	require.True(t, errors.As(err, &oe), "%v", err)
	require.Contains(t, err.Error(), "spec.overrides[1] (big), patches[0] on Widget.example.com w: ")

	// A patch that names an object the Release does not have (a typo) stalls it too, rather than
	// patching nothing while the member's revision changes.
	rel.Spec.Overrides[1].Patches[0] = v1alpha1.ReleasePatch{Kind: "ConfigMap", Name: "nosuch", Patch: `{"data":{"k":"v"}}`}
	_, err = Render(rel, Inputs{})
	require.True(t, errors.As(err, &oe), "%v", err)
	require.EqualError(t, err, "spec.overrides[1] (big), patches[0]: targets ConfigMap nosuch, which the Release does not have (it has no ConfigMap): check the kind, group and name")
	rel.Spec.Overrides[1].Patches[0] = v1alpha1.ReleasePatch{Group: "apps", Kind: "Deployment", Name: "webb", Patch: `{"spec":{"replicas":2}}`}
	_, err = Render(rel, Inputs{})
	require.ErrorContains(t, err, "targets Deployment.apps webb, which the Release does not have (its Deployment objects are web)")
}

func nested(t *testing.T, u *unstructured.Unstructured, path ...string) any {
	t.Helper()
	v, ok, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	require.NoError(t, err)
	require.True(t, ok, "%v", path)
	return v
}

// A Secret's values never reach status through spec.feedback: a member's controllers fill some
// in (a service account's token), and the cluster set's viewers read status.
func TestFeedbackRefusesSecrets(t *testing.T) {
	rel := &v1alpha1.Release{Spec: v1alpha1.ReleaseSpec{Feedback: []v1alpha1.ReleaseFeedback{
		{Name: "phase", Kind: "Pod", ObjectName: "p", JSONPath: "{.status.phase}"},
		{Name: "token", Kind: "Secret", ObjectName: "sa-token", JSONPath: "{.data.token}"}}}}
	_, err := compileFeedback(rel)
	require.ErrorContains(t, err, "spec.feedback[1] (token): reads a Secret")
	rel.Spec.Feedback[1].Group = "example.com" // another group's Secret kind is not the core Secret
	_, err = compileFeedback(rel)
	require.NoError(t, err)
}
