package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Release's members carry what its spec.feedback read on each, by name, and their shares of
// its spec.divide, in GET /releases and its stream; a member without any carries none.
func TestReleaseMembersCarryFeedback(t *testing.T) {
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "fleet", UID: "u1"}}
	slices := []v1alpha1.ReleaseStatusSlice{{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.ReleaseLabel: "db"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rel, v1alpha1.SchemeGroupVersion.WithKind("Release"))}},
		Members: []v1alpha1.ReleaseMemberStatus{
			{Cluster: "m1", Phase: v1alpha1.PhaseReady, Feedback: []v1alpha1.ReleaseFeedbackValue{{Name: "endpoint", Value: "10.0.0.1:5432"}},
				Shares: []v1alpha1.ReleaseMemberShare{{Name: "db", Replicas: 3}}},
			{Cluster: "m2", Phase: v1alpha1.PhasePending},
		}}}
	out, err := json.Marshal(releaseOf(rel, slices).PerMember)
	require.NoError(t, err)
	require.JSONEq(t, `[{"cluster":"m1","phase":"Ready","feedback":{"endpoint":"10.0.0.1:5432"},"shares":{"db":3}},{"cluster":"m2","phase":"Pending"}]`, string(out))
}
