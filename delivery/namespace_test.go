package delivery_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
)

// A targetNamespace that a member lacks fails that member (the README's own example hit it);
// with createNamespace the Release makes it there first, leaves one that exists alone (whoever
// made it), and leaves the namespaces it made in place when it goes: they may hold others' objects.
func TestReleaseCreatesItsNamespace(t *testing.T) {
	env := startDelivery(t)
	appNS := "made-" + env.ns
	_, err := env.members["member-2"].CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, kube := range env.members {
			_ = kube.CoreV1().Namespaces().Delete(t.Context(), appNS, metav1.DeleteOptions{})
		}
	})
	env.decide(t, "member-1", "member-2")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "made", Namespace: env.ns}, Spec: v1alpha1.ReleaseSpec{
		Source:          v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("made", map[string]string{"color": "blue"}))},
		Placement:       v1alpha1.ReleasePlacement{Name: "web"},
		TargetNamespace: appNS,
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(env.ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	notFound := `namespaces "` + appNS + `" not found`
	env.waitRelease(t, "made", "member-1 failed: "+notFound, func(r *v1alpha1.Release) bool {
		return r.Status.Ready == 1 && len(r.Status.Worst) == 1 && strings.Contains(r.Status.Worst[0].Message, notFound)
	})

	env.updateRelease(t, env.ns, "made", func(cur *v1alpha1.Release) { cur.Spec.CreateNamespace = true })
	env.waitRelease(t, "made", "ready on both", func(r *v1alpha1.Release) bool {
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == 2
	})
	made, err := env.members["member-1"].CoreV1().Namespaces().Get(t.Context(), appNS, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, env.ns+"/made", made.Annotations[delivery.CreatedByAnnotation])
	existing, err := env.members["member-2"].CoreV1().Namespaces().Get(t.Context(), appNS, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, existing.Annotations, delivery.CreatedByAnnotation, "a namespace that existed was taken over")

	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(env.ns).Delete(t.Context(), "made", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		_, err := env.members["member-1"].CoreV1().ConfigMaps(appNS).Get(t.Context(), "made", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 100*time.Millisecond, "the Release's objects stay")
	made, err = env.members["member-1"].CoreV1().Namespaces().Get(t.Context(), appNS, metav1.GetOptions{})
	require.NoError(t, err, "the namespace the Release made went with it")
	require.Nil(t, made.DeletionTimestamp, "the namespace the Release made is being deleted")
}
