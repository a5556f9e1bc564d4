package delivery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Largest remainder: the shares sum to the total, the minimum is kept where the total allows,
// ties go to the heavier member and then by name, and weights of 0 leave the rest even.
func TestDivide(t *testing.T) {
	names := []string{"member-1", "member-2", "member-3"}
	for _, tc := range []struct {
		total, least int32
		names        []string
		weights      []int64
		want         []int32
	}{
		{6, 0, names, []int64{3, 2, 1}, []int32{3, 2, 1}},
		{6, 0, []string{"member-1", "member-3"}, []int64{3, 1}, []int32{5, 1}}, // 4.5 and 1.5: the heavier has the tie
		{7, 0, names, []int64{1, 1, 1}, []int32{3, 2, 2}},                      // a tie of equals: by name
		{10, 2, names, []int64{1, 0, 0}, []int32{6, 2, 2}},
		{4, 2, names, []int64{1, 1, 1}, []int32{2, 1, 1}}, // short of the minimum: even, the rest by weight
		{5, 0, names, []int64{0, 0, 0}, []int32{2, 2, 1}},
		{0, 3, names, []int64{1, 2, 3}, []int32{0, 0, 0}},
		{30, 0, names, []int64{50, 30, 20}, []int32{15, 9, 6}},
	} {
		require.Equal(t, tc.want, Divide(tc.total, tc.least, tc.names, tc.weights), "%d (min %d) by %v", tc.total, tc.least, tc.weights)
	}
	require.Nil(t, Divide(6, 0, nil, nil), "no members, no shares")
}

// The plan's property: for any members, weights, totals and minimums, the shares sum to the
// total, each has its minimum where the total allows it, a heavier member never has fewer than
// a lighter one, and the shares do not depend on the members' order. And the Clusters' capacity
// moving (Pods coming and going) moves no share.
func TestDivideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 4))
	for range 5000 {
		n := 1 + r.IntN(12)
		names, weights := make([]string, n), make([]int64, n)
		for i := range names {
			names[i], weights[i] = fmt.Sprintf("m-%02d", i), int64(r.IntN(6))
		}
		total, least := int32(r.IntN(200)), int32(r.IntN(5))
		shares := Divide(total, least, names, weights)
		var sum int32
		floor := min(least, total/int32(n))
		for i, s := range shares {
			sum += s
			require.GreaterOrEqual(t, s, floor, "member %s is under its minimum", names[i])
			for j := range shares {
				if weights[i] > weights[j] {
					require.GreaterOrEqual(t, s, shares[j], "%v by %v: heavier %s has fewer than %s", total, weights, names[i], names[j])
				}
			}
		}
		require.Equal(t, total, sum, "%d by %v (min %d): %v", total, weights, least, shares)

		perm := r.Perm(n)
		pn, pw := make([]string, n), make([]int64, n)
		for i, p := range perm {
			pn[i], pw[i] = names[p], weights[p]
		}
		for i, s := range Divide(total, least, pn, pw) {
			require.Equal(t, shares[perm[i]], s, "the shares of %d by %v depend on the members' order", total, weights)
		}
	}

	rel := divided(t, v1alpha1.ReleaseDivision{Name: "shop", Group: "apps", Kind: "Deployment", ObjectName: "shop", Replicas: 30,
		Weights: []v1alpha1.ReleaseDivisionWeight{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "big"}}, Weight: 3}}})
	b, err := Render(rel, Inputs{})
	require.NoError(t, err)
	clusters := map[types.NamespacedName]*v1alpha1.Cluster{}
	var members []types.NamespacedName
	for i := range 8 {
		k := types.NamespacedName{Namespace: "fleet", Name: fmt.Sprintf("member-%d", i)}
		members = append(members, k)
		clusters[k] = &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Labels: map[string]string{"tier": []string{"big", "small"}[i%2]}}}
	}
	first := sharesOf(b.DividedAmong(members, func(k types.NamespacedName) *v1alpha1.Cluster { return clusters[k] }), clusters)
	for range 200 {
		for _, cl := range clusters {
			cl.Status.Resources = &v1alpha1.ClusterResources{Requested: corev1.ResourceList{"cpu": *resource.NewMilliQuantity(r.Int64N(64000), resource.DecimalSI)}}
		}
		require.Equal(t, first, sharesOf(b.DividedAmong(members, func(k types.NamespacedName) *v1alpha1.Cluster { return clusters[k] }), clusters),
			"the members' capacity moved a share")
	}
}

// sharesOf is each Cluster's shares in b.
func sharesOf(b *Bundle, clusters map[types.NamespacedName]*v1alpha1.Cluster) map[string][]v1alpha1.ReleaseMemberShare {
	out := map[string][]v1alpha1.ReleaseMemberShare{}
	for k, cl := range clusters {
		out[k.Name] = b.SharesFor(cl)
	}
	return out
}

// divided is a Release of a Deployment shop of 1 replica, and a ConfigMap, with divisions.
func divided(t *testing.T, divisions ...v1alpha1.ReleaseDivision) *v1alpha1.Release {
	t.Helper()
	deploy := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"shop"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"shop"}},` +
		`"template":{"metadata":{"labels":{"app":"shop"}},"spec":{"containers":[{"name":"shop","image":"registry.example/shop:1"}]}}}}`
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shop"},"data":{"k":"v"}}`
	return &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "fleet"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: []runtime.RawExtension{{Raw: []byte(deploy)}, {Raw: []byte(cm)}}}, Divide: divisions}}
}

// Each member's share is its Deployment's spec.replicas and part of its revision: a member whose
// share is unchanged keeps its revision when another's moves; a member that left keeps the
// revision of the share it ran. A division of a workload the Release lacks is a *DivisionError
// naming it.
func TestDividedAmong(t *testing.T) {
	rel := divided(t, v1alpha1.ReleaseDivision{Name: "shop", Group: "apps", Kind: "Deployment", ObjectName: "shop", Replicas: 6,
		Weights: []v1alpha1.ReleaseDivisionWeight{{Cluster: "member-1", Weight: 3}, {Cluster: "member-2", Weight: 2}}})
	b, err := Render(rel, Inputs{})
	require.NoError(t, err)
	cluster := func(k types.NamespacedName) *v1alpha1.Cluster {
		return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace}}
	}
	member := func(names ...string) []types.NamespacedName {
		var out []types.NamespacedName
		for _, n := range names {
			out = append(out, types.NamespacedName{Namespace: "fleet", Name: n})
		}
		return out
	}
	replicasOf := func(b *Bundle, name string) (int64, string) {
		objs, err := b.objectsFor(cluster(types.NamespacedName{Name: name}))
		require.NoError(t, err)
		i := slices.IndexFunc(objs, func(u *unstructured.Unstructured) bool { return u.GetKind() == "Deployment" })
		n, _, _ := unstructured.NestedFieldNoCopy(objs[i].Object, "spec", "replicas")
		return int64(n.(float64)), objs[i].GetLabels()[v1alpha1.RevisionLabel]
	}
	all := b.DividedAmong(member("member-1", "member-2", "member-3"), cluster)
	for name, want := range map[string]int64{"member-1": 3, "member-2": 2, "member-3": 1} {
		n, rev := replicasOf(all, name)
		require.Equal(t, want, n, "%s's replicas", name)
		require.Equal(t, all.revisionFor(cluster(types.NamespacedName{Name: name})), rev)
		require.Equal(t, []v1alpha1.ReleaseMemberShare{{Name: "shop", Replicas: int32(want)}}, all.SharesFor(cluster(types.NamespacedName{Name: name})))
	}
	_, rev3 := replicasOf(all, "member-3")

	// member-2 leaves: its 2 go to the others (6 by 3 and 1: 5 and 1), and member-3's revision,
	// its share unchanged, stays.
	two := b.DividedAmong(member("member-1", "member-3"), cluster)
	n1, _ := replicasOf(two, "member-1")
	n3, rev := replicasOf(two, "member-3")
	require.Equal(t, int64(5), n1)
	require.Equal(t, int64(1), n3)
	require.Equal(t, rev3, rev, "member-3's share did not move, but its revision did")
	m2 := cluster(types.NamespacedName{Name: "member-2"})
	require.Empty(t, two.SharesFor(m2))
	require.Equal(t, all.revisionFor(m2), two.revisionKept(m2, []v1alpha1.ReleaseMemberShare{{Name: "shop", Replicas: 2}}),
		"a member that left is judged at a revision other than the one it ran")

	rel.Spec.Divide[0].ObjectName = "shopp"
	_, err = Render(rel, Inputs{})
	var de *DivisionError
	require.True(t, errors.As(err, &de), "%v", err)
	require.EqualError(t, err, "spec.divide[0] (shop): divides Deployment.apps shopp, which the Release does not have: check the group, kind and objectName")

	rel.Spec.Divide[0].ObjectName = "shop"
	rel.Spec.Drift = &v1alpha1.ReleaseDrift{Ignore: []v1alpha1.ReleaseIgnoredFields{{Group: "apps", Kind: "Deployment", Paths: []string{"/spec/replicas"}}}}
	_, err = Render(rel, Inputs{})
	require.ErrorContains(t, err, "spec.divide[0] (shop): spec.drift.ignore leaves Deployment's /spec/replicas to the members")
}
