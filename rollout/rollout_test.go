package rollout

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clientset/versioned/fake"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/delivery"
)

// Target picks the revision undo puts back: by number, or the newest that is not current; a
// number the history lacks lists those it has, since an undone revision comes back numbered anew.
func TestTarget(t *testing.T) {
	history := []delivery.Revision{{Number: 2, Hash: "b"}, {Number: 3, Hash: "a"}, {Number: 4, Hash: "c"}}
	got, err := Target(history, "c", 0)
	require.NoError(t, err)
	require.Equal(t, int64(3), got.Number)
	got, err = Target(history, "c", 2)
	require.NoError(t, err)
	require.Equal(t, "b", got.Hash)
	_, err = Target(history, "c", 1)
	var invalid *InvalidError
	require.ErrorAs(t, err, &invalid)
	require.Contains(t, err.Error(), "unable to find revision 1 in its history; it has revisions 2, 3, 4")
	_, err = Target(history[2:], "c", 0)
	var refused *RefusedError
	require.ErrorAs(t, err, &refused)
}

// Each verb changes only what it names, refuses what kubectl's would, and says which Release
// it could not find, with the registry's NotFound kept for callers to test.
func TestVerbs(t *testing.T) {
	ctx := context.Background()
	registry := fake.NewClientset(&v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "web", Generation: 2},
		Status: v1alpha1.ReleaseStatus{ObservedGeneration: 1, Revision: "r1"}})
	releases := registry.ClusterregistryV1alpha1()
	get := func() *v1alpha1.Release {
		rel, err := releases.Releases("fleet").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		return rel
	}

	var refused *RefusedError
	_, err := Approve(ctx, releases, "fleet", "web", 0)
	require.ErrorAs(t, err, &refused)
	require.Contains(t, err.Error(), "its rollout's approval is Automatic")

	require.NoError(t, Pause(ctx, releases, "fleet", "web"))
	require.True(t, get().Spec.Suspend)
	require.ErrorAs(t, Pause(ctx, releases, "fleet", "web"), &refused)
	require.NoError(t, Resume(ctx, releases, "fleet", "web"))
	require.False(t, get().Spec.Suspend)

	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	require.NoError(t, Restart(ctx, releases, "fleet", "web", at))
	require.Equal(t, "2026-11-29T08:00:00Z", get().Annotations[v1alpha1.RestartedAtAnnotation])

	rel := get()
	rel.Spec.Rollout = &v1alpha1.ReleaseRollout{Approval: v1alpha1.ApprovalManual}
	_, err = releases.Releases("fleet").Update(ctx, rel, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = Approve(ctx, releases, "fleet", "web", 0)
	require.ErrorAs(t, err, &refused)
	require.Contains(t, err.Error(), "has not rendered generation 2 yet", "an approval of a revision the controller has not made")

	err = Pause(ctx, releases, "fleet", "nosuch")
	require.True(t, apierrors.IsNotFound(err), err)
	require.Contains(t, err.Error(), "release fleet/nosuch: ")
}
