package delivery

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

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

// capacityCluster is a Cluster whose Nodes have cpu free of 16 allocatable, observed at seen.
func capacityCluster(name string, free int64, seen time.Time) *v1alpha1.Cluster {
	return &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet"}, Status: v1alpha1.ClusterStatus{Resources: &v1alpha1.ClusterResources{
		Allocatable:      corev1.ResourceList{"cpu": *resource.NewQuantity(16, resource.DecimalSI)},
		Requested:        corev1.ResourceList{"cpu": *resource.NewQuantity(16-free, resource.DecimalSI)},
		LastObservedTime: metav1.NewTime(seen)}}}
}

// A Capacity division weighs each member by how many of its Pods (1 cpu each) fit in what the
// member has free, a member whose figures are old or missing by 0; its shares are kept for their
// basis (the members) whatever the figures do next, from the Controller's plans until the
// status has them and from the status after; a new member divides again, each member's own
// share added back to its room.
func TestCapacityDivision(t *testing.T) {
	rel := divided(t, v1alpha1.ReleaseDivision{Name: "shop", Group: "apps", Kind: "Deployment", ObjectName: "shop", Replicas: 9, By: v1alpha1.DivideByCapacity})
	_, err := Render(rel, Inputs{})
	require.ErrorContains(t, err, "spec.divide[0] (shop): by Capacity weighs members by how many of the workload's Pods fit, and its Pod template requests nothing")
	b := requestingCPU(t, rel)

	now := time.Now()
	clusters := map[string]*v1alpha1.Cluster{
		"m1": capacityCluster("m1", 6, now), "m2": capacityCluster("m2", 3, now), "m3": capacityCluster("m3", 16, now.Add(-time.Hour)),
	}
	cluster := func(k types.NamespacedName) *v1alpha1.Cluster { return clusters[k.Name] }
	members := []types.NamespacedName{{Namespace: "fleet", Name: "m1"}, {Namespace: "fleet", Name: "m2"}, {Namespace: "fleet", Name: "m3"}}
	got := func(b *Bundle) map[string]int32 {
		out := map[string]int32{}
		for name := range clusters {
			for _, s := range b.SharesFor(clusters[name]) {
				out[name] = s.Replicas
			}
		}
		return out
	}
	plans := map[string]v1alpha1.ReleaseDivisionStatus{}
	first := b.dividedWith(members, cluster, plans, now)
	require.Equal(t, map[string]int32{"m1": 6, "m2": 3, "m3": 0}, got(first), "m3's figures are an hour old: it weighs 0")
	require.Len(t, first.plans, 1)

	// Its own Pods land on m1 and m2, and others come and go: the shares stay, from the plans.
	clusters["m1"], clusters["m2"], clusters["m3"] = capacityCluster("m1", 0, now), capacityCluster("m2", 5, now), capacityCluster("m3", 16, now)
	require.Equal(t, got(first), got(b.dividedWith(members, cluster, plans, now)), "the figures moved a share")
	// A restarted controller has no plans: the status has them.
	rel.Status.Divisions = first.plans
	require.Equal(t, got(first), got(b.dividedWith(members, cluster, map[string]v1alpha1.ReleaseDivisionStatus{}, now)), "a restart moved a share")

	// m3 leaves: divided again. m1 runs its 6 of them in its 0 free (6 fits), m2 has 5 free and
	// its 3 (8 fits): 9 by 6 and 8 is 4 and 5 (3.86 and 5.14).
	two := b.dividedWith(members[:2], cluster, plans, now)
	require.Equal(t, map[string]int32{"m1": 4, "m2": 5}, got(two))
	require.NotEqual(t, first.plans[0].Basis, two.plans[0].Basis)

	require.ErrorContains(t, b.capacityBound(v1alpha1.MaxCapacityDivisionMembers+1), "by Capacity divides across at most 1000 members, and the decision names 1001")
	require.NoError(t, b.capacityBound(v1alpha1.MaxCapacityDivisionMembers))
}

// requestingCPU renders rel with its shop container requesting 1 cpu.
func requestingCPU(t *testing.T, rel *v1alpha1.Release) *Bundle {
	t.Helper()
	rel.Spec.Source.Manifests[0].Raw = []byte(strings.Replace(string(rel.Spec.Source.Manifests[0].Raw),
		`"image":"registry.example/shop:1"`, `"image":"registry.example/shop:1","resources":{"requests":{"cpu":"1"}}`, 1))
	b, err := Render(rel, Inputs{})
	require.NoError(t, err)
	return b
}

// Over generated steps, each moving every member's free cpu (Pods coming and going) or changing
// who the members are: the shares always sum to the total and keep the minimum, and a step that
// moves only the figures moves no share, whether the shares come from the Controller's plans or,
// after a restart, from the status alone.
func TestCapacityDivisionProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(77, 5))
	now := time.Now()
	for run := range 200 {
		total, least := int32(r.IntN(40)), int32(r.IntN(3))
		rel := divided(t, v1alpha1.ReleaseDivision{Name: "shop", Group: "apps", Kind: "Deployment", ObjectName: "shop", Replicas: total, MinPerMember: least, By: v1alpha1.DivideByCapacity})
		b := requestingCPU(t, rel)
		clusters := map[string]*v1alpha1.Cluster{}
		cluster := func(k types.NamespacedName) *v1alpha1.Cluster { return clusters[k.Name] }
		var members []types.NamespacedName
		plans := map[string]v1alpha1.ReleaseDivisionStatus{}
		var before map[string]int32
		for step := range 30 {
			moved := step > 0 && r.IntN(4) > 0
			if !moved {
				members = nil
				for i := range 1 + r.IntN(6) {
					members = append(members, types.NamespacedName{Namespace: "fleet", Name: fmt.Sprintf("m%d", i+r.IntN(3))})
				}
				slices.SortFunc(members, func(a, b types.NamespacedName) int { return strings.Compare(a.Name, b.Name) })
				members = slices.Compact(members) // a decision names a member once
			}
			for _, k := range members {
				clusters[k.Name] = capacityCluster(k.Name, r.Int64N(17), now)
			}
			if r.IntN(5) == 0 {
				plans = map[string]v1alpha1.ReleaseDivisionStatus{} // a restart: the status alone
			}
			d := b.dividedWith(members, cluster, plans, now)
			rel.Status.Divisions = d.plans // what the owner writes
			shares, sum := map[string]int32{}, int32(0)
			for _, k := range members {
				for _, s := range d.SharesFor(clusters[k.Name]) {
					shares[k.Name] = s.Replicas
					sum += s.Replicas
				}
			}
			require.Equal(t, total, sum, "run %d step %d: the shares %v do not sum", run, step, shares)
			for name, n := range shares {
				if total >= least*int32(len(members)) {
					require.GreaterOrEqual(t, n, least, "run %d step %d: %s below the minimum", run, step, name)
				}
			}
			if moved {
				require.Equal(t, before, shares, "run %d step %d: the figures alone moved a share", run, step)
			}
			before = shares
		}
	}
}
