package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// spec.dependsOn, against real members: app waits on each member until db is Ready there (per
// member: db fails on member-2, whose namespace is missing, and app goes on member-1 alone);
// once the namespace is made, db and then app reach member-2. A cycle stalls every Release in it,
// naming it; a Release cannot depend on itself. Deleting db first leaves its objects until app,
// which depends on it, has left.
func TestReleaseDependencies(t *testing.T) {
	env := startDelivery(t)
	env.decide(t, "member-1", "member-2")
	dbNS := "db-" + env.ns
	_, err := env.members["member-1"].CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dbNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	releases := env.registry.ClusterregistryV1alpha1().Releases(env.ns)
	create := func(name, targetNS string, dependsOn ...string) error {
		rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.ReleaseSpec{
			Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, configMap(name+"-"+env.ns, map[string]string{"k": "v"}))},
			Placement:       v1alpha1.ReleasePlacement{Name: "web"},
			TargetNamespace: targetNS}}
		for _, d := range dependsOn {
			rel.Spec.DependsOn = append(rel.Spec.DependsOn, v1alpha1.ReleaseDependency{Name: d})
		}
		_, err := releases.Create(t.Context(), rel, metav1.CreateOptions{})
		return err
	}
	has := func(member, ns, name string) bool {
		_, err := env.members[member].CoreV1().ConfigMaps(ns).Get(t.Context(), name+"-"+env.ns, metav1.GetOptions{})
		return err == nil
	}

	require.NoError(t, create("app", "default", "db")) // first: it waits
	require.NoError(t, create("db", dbNS))
	got := env.waitRelease(t, "app", "on member-1, waiting on member-2", func(r *v1alpha1.Release) bool {
		return r.Status.Ready == 1 && len(r.Status.Worst) == 1 && r.Status.Worst[0].Reason == "DependencyNotReady"
	})
	require.Equal(t, "member-2", got.Status.Worst[0].Cluster)
	require.Equal(t, v1alpha1.PhasePending, got.Status.Worst[0].Phase)
	require.Contains(t, got.Status.Worst[0].Message, "waits for release db to be Ready on this member")
	require.True(t, has("member-1", "default", "app"))
	require.False(t, has("member-2", "default", "app"), "app reached member-2 before db was Ready there")

	_, err = env.members["member-2"].CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: dbNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	env.waitRelease(t, "app", "on both", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	require.True(t, has("member-2", dbNS, "db"))

	// A cycle stalls both, naming it; depending on itself is refused by the API.
	require.NoError(t, create("x", "default", "y"))
	require.NoError(t, create("y", "default", "x"))
	for _, name := range []string{"x", "y"} {
		r := env.waitRelease(t, name, "stalled by the cycle", func(r *v1alpha1.Release) bool {
			st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
			return st != nil && st.Reason == "DependencyCycle"
		})
		other := map[string]string{"x": "y", "y": "x"}[name]
		require.Contains(t, meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled).Message, name+" → "+other+" → "+name)
		require.False(t, has("member-1", "default", name), "%s was applied within a cycle", name)
	}
	err = create("self", "default", "self")
	require.Error(t, err)
	require.Contains(t, err.Error(), "spec.dependsOn: Invalid value: ")
	require.Contains(t, err.Error(), "a Release cannot wait for itself")
	require.NotContains(t, err.Error(), "<nil>", "the refusal names no field")

	// Removal: dependents first. db, deleted first, keeps its objects while app is there.
	require.NoError(t, releases.Delete(t.Context(), "db", metav1.DeleteOptions{}))
	r := env.waitRelease(t, "db", "waiting for app to leave", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return r.DeletionTimestamp != nil && st != nil && st.Reason == "Removing" && strings.Contains(st.Message, "release app, which depends on this one")
	})
	t.Logf("db: %s", meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled).Message)
	require.True(t, has("member-1", dbNS, "db"), "db left before app")
	require.NoError(t, releases.Delete(t.Context(), "app", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := releases.Get(t.Context(), "db", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "db was not removed once app left")
	for _, m := range []string{"member-1", "member-2"} {
		require.False(t, has(m, dbNS, "db") || has(m, "default", "app"), "objects left on %s", m)
	}
	for _, name := range []string{"x", "y"} {
		require.NoError(t, releases.Delete(t.Context(), name, metav1.DeleteOptions{}))
	}
}

// A dependency the cluster set does not have is said to be missing (Stalled DependencyNotFound,
// naming it), rather than waited for as if it were only not Ready yet; nothing is applied.
func TestMissingDependencyIsSaid(t *testing.T) {
	env := startDelivery(t)
	env.decide(t, "member-1")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "orphan"}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("orphan-"+env.ns, map[string]string{"k": "v"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
		DependsOn: []v1alpha1.ReleaseDependency{{Name: "no-such-release"}}}}
	_, err := env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	r := env.waitRelease(t, "orphan", "stalled on the missing dependency", func(r *v1alpha1.Release) bool {
		st := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		return st != nil && st.Reason == "DependencyNotFound"
	})
	require.Contains(t, meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled).Message,
		"spec.dependsOn names no-such-release, which cluster set "+env.ns+" does not have")
	_, err = env.members["member-1"].CoreV1().ConfigMaps("default").Get(t.Context(), "orphan-"+env.ns, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "applied with its dependency missing: %v", err)
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "orphan", metav1.DeleteOptions{}))
}
