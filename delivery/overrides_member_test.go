package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// An override per region, against real members: member-1 (eu-west) gets its host, member-2
// keeps the Release's; member-1's revision is the Release's with the override's. Changing the
// override applies member-1 again and leaves member-2's object untouched. A patch that does not
// apply stalls the Release, naming the override and the object.
func TestOverridesPerRegion(t *testing.T) {
	env := startDelivery(t)
	env.labelRegions(t)
	env.decide(t, "member-1", "member-2")
	name := "site-" + env.ns
	region := func(host string) []v1alpha1.ReleaseOverride {
		return []v1alpha1.ReleaseOverride{{Name: "eu", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"topology.kubernetes.io/region": "eu-west"}},
			Patches: []v1alpha1.ReleasePatch{{Kind: "ConfigMap", Name: name, Patch: "data:\n  host: " + host + "\n"}}}}
	}
	releases := env.registry.ClusterregistryV1alpha1().Releases(env.ns)
	_, err := releases.Create(t.Context(), &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "site"}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap(name, map[string]string{"host": "example.com"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"}, Overrides: region("eu.example.com")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	rel := env.waitRelease(t, "site", "ready on both", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	host := func(member string) (string, string) {
		cm, err := env.members[member].CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		return cm.Data["host"], cm.ResourceVersion
	}
	h1, _ := host("member-1")
	h2, rv2 := host("member-2")
	require.Equal(t, "eu.example.com", h1)
	require.Equal(t, "example.com", h2)
	cm1, err := env.members["member-1"].CoreV1().ConfigMaps("default").Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cm1.Labels[v1alpha1.RevisionLabel], rel.Status.Revision+"-"), "member-1's revision: %s", cm1.Labels[v1alpha1.RevisionLabel])

	env.updateRelease(t, env.ns, "site", func(cur *v1alpha1.Release) { cur.Spec.Overrides = region("eu2.example.com") })
	require.Eventually(t, func() bool { h, _ := host("member-1"); return h == "eu2.example.com" }, 20*time.Second, 100*time.Millisecond, "the override's change did not reach member-1")
	env.waitRelease(t, "site", "ready on both again", func(r *v1alpha1.Release) bool {
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == 2
	})
	_, rv := host("member-2")
	require.Equal(t, rv2, rv, "member-2, which the override does not choose, was applied again")
	require.Equal(t, rel.Status.Revision, env.waitRelease(t, "site", "its revision", func(*v1alpha1.Release) bool { return true }).Status.Revision,
		"an override's change is not a new revision of the Release")

	env.updateRelease(t, env.ns, "site", func(cur *v1alpha1.Release) {
		cur.Spec.Overrides[0].Patches[0] = v1alpha1.ReleasePatch{Kind: "ConfigMap", Type: v1alpha1.PatchJSON, Patch: `[{"op":"remove","path":"/data/port"}]`}
	})
	got := env.waitRelease(t, "site", "stalled by the patch", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Reason == "InvalidOverride"
	})
	require.Contains(t, meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ReleaseStalled).Message, "spec.overrides[0] (eu), patches[0] on ConfigMap "+name)
	h1, _ = host("member-1")
	require.Equal(t, "eu2.example.com", h1, "a patch that does not apply changed the member")
	require.NoError(t, releases.Delete(t.Context(), "site", metav1.DeleteOptions{}))
}
