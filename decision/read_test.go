package decision_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
)

func slice(name, index string, refs ...cpv1alpha1.ClusterProfileReference) cpv1alpha1.PlacementDecision {
	pd := cpv1alpha1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name,
		Labels: map[string]string{cpv1alpha1.DecisionKeyLabel: "web"}}}
	if index != "" {
		pd.Labels[cpv1alpha1.DecisionIndexLabel] = index
	}
	for _, r := range refs {
		pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{ClusterProfileRef: r, Reason: "why " + r.Name})
	}
	return pd
}

func ref(ns, name string) cpv1alpha1.ClusterProfileReference {
	return cpv1alpha1.ClusterProfileReference{Namespace: ns, Name: name}
}

// Slices in decision-index order (one without an index last), each Cluster once, references to
// another namespace refused, reasons kept.
func TestFromSlices(t *testing.T) {
	d := decision.FromSlices("fleet", "web", []cpv1alpha1.PlacementDecision{
		slice("web-x", "", ref("", "z")),
		slice("web-1", "1", ref("", "c"), ref("fleet", "a")), // a again: kept once, at its first place
		slice("web-0", "0", ref("", "a"), ref("", "b"), ref("other-set", "stolen"), ref("", "")),
	})
	require.Equal(t, []string{"web-0", "web-1", "web-x"}, d.Slices)
	var names []string
	for _, c := range d.Clusters {
		require.Equal(t, "fleet", c.Namespace)
		names = append(names, c.Name)
	}
	require.Equal(t, []string{"a", "b", "c", "z"}, names)
	require.Equal(t, []cpv1alpha1.ClusterProfileReference{ref("other-set", "stolen"), ref("", "")}, d.Refused)
	require.Equal(t, "why b", d.Reasons[types.NamespacedName{Namespace: "fleet", Name: "b"}])
}

// Members are the decision's Clusters among those given, in the decision's order; the rest are
// named as missing.
func TestMembers(t *testing.T) {
	d := decision.FromSlices("fleet", "web", []cpv1alpha1.PlacementDecision{slice("web-0", "0", ref("", "b"), ref("", "gone"), ref("", "a"))})
	var from []*multicluster.Member
	for _, name := range []string{"a", "b", "c"} {
		from = append(from, multicluster.NewMember(&v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: name}}, multicluster.Clients{}))
	}
	members, missing := d.Members(from)
	require.Len(t, members, 2)
	require.Equal(t, "fleet/b", members[0].String())
	require.Equal(t, "fleet/a", members[1].String())
	require.Equal(t, []types.NamespacedName{{Namespace: "fleet", Name: "gone"}}, missing)
}
