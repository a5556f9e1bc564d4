package v1alpha1_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A member that a handoff between the replicas of a sharded controller leaves in two slices is
// listed once, from the slice that applied there last; slices another Release controls are not
// read.
func TestMembersOfListsEachMemberOnce(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "set", UID: types.UID("rel-uid")}}
	owner := *metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))
	earlier, later := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	slice := func(name string, owners []metav1.OwnerReference, members ...v1alpha1.ReleaseMemberStatus) v1alpha1.ReleaseStatusSlice {
		return v1alpha1.ReleaseStatusSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "set", OwnerReferences: owners}, Members: members}
	}
	other := owner
	other.UID = "someone-else"
	got := v1alpha1.MembersOf(rel, []v1alpha1.ReleaseStatusSlice{
		slice("web-b-0", []metav1.OwnerReference{owner},
			v1alpha1.ReleaseMemberStatus{Cluster: "member-1", Phase: v1alpha1.PhaseReady, LastApplied: &later},
			v1alpha1.ReleaseMemberStatus{Cluster: "member-2", Phase: v1alpha1.PhaseReady}),
		slice("web-a-0", []metav1.OwnerReference{owner},
			v1alpha1.ReleaseMemberStatus{Cluster: "member-1", Phase: v1alpha1.PhaseProgressing, LastApplied: &earlier}),
		slice("web-0", []metav1.OwnerReference{other}, v1alpha1.ReleaseMemberStatus{Cluster: "member-3"}),
	})
	require.Len(t, got, 2)
	require.Equal(t, "member-1", got[0].Cluster)
	require.Equal(t, v1alpha1.PhaseReady, got[0].Phase, "the older report was kept")
	require.Equal(t, "member-2", got[1].Cluster)
}

func TestReleaseFactsHaveOneHome(t *testing.T) {
	rel := &v1alpha1.Release{}
	require.Equal(t, "default", rel.TargetNamespaceOrDefault())
	rel.Spec.TargetNamespace = "shop"
	require.Equal(t, "shop", rel.TargetNamespaceOrDefault())
	rel.Spec.Placement.DecisionKey = "key"
	require.Equal(t, "key", rel.DecisionKey())
	rel.Spec.Placement.Name = "web"
	require.Equal(t, "web", rel.DecisionKey())
}
