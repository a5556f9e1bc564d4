package delivery

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Release's spec.divide splits a workload's replicas across the decision's members. Each
// pass divides again, from the decision's members and their Clusters' labels alone: a pure
// function of them, so the shares move only when membership (or the division, or a weight's
// labels) does, every replica of a sharded controller comes to the same shares, and a restart
// changes none. A member's share is one more override of it (overridesFor): it is part of the
// member's revision, so a share that changes is applied to that member only, and a member that
// left the decision keeps the share it last ran until it is removed or comes back.

// DivisionError is a division the Release's objects cannot take: the Release stalls,
// InvalidDivision.
type DivisionError struct {
	// Where names the division: spec.divide[0] (shop).
	Where string
	Err   error
}

func (e *DivisionError) Error() string { return fmt.Sprintf("%s: %v", e.Where, e.Err) }
func (e *DivisionError) Unwrap() error { return e.Err }

// division is one spec.divide entry, compiled.
type division struct {
	where, name string
	gk          schema.GroupKind
	object      string
	total, min  int32
	weights     []weightRule
	// byCapacity: weighed by the Pods of perPod that fit in each member's room (divide_capacity.go);
	// sum is a hash of the entry as written, part of such a division's basis.
	byCapacity bool
	perPod     corev1.ResourceList
	sum        string
}

// weightRule is one spec.divide[].weights entry: a Cluster's name, or a selector of labels.
type weightRule struct {
	cluster  string
	selector labels.Selector
	weight   int32
}

// compileDivisions parses rel's spec.divide.
func compileDivisions(rel *v1alpha1.Release) ([]division, error) {
	var out []division
	for i, d := range rel.Spec.Divide {
		raw, _ := json.Marshal(d)
		sum := sha256.Sum256(raw)
		dv := division{where: fmt.Sprintf("spec.divide[%d] (%s)", i, d.Name), name: d.Name,
			gk: schema.GroupKind{Group: d.Group, Kind: d.Kind}, object: d.ObjectName, total: d.Replicas, min: d.MinPerMember,
			byCapacity: d.By == v1alpha1.DivideByCapacity, sum: hex.EncodeToString(sum[:])}
		for j, w := range d.Weights {
			rule := weightRule{cluster: w.Cluster, weight: w.Weight}
			if w.ClusterSelector != nil {
				sel, err := metav1.LabelSelectorAsSelector(w.ClusterSelector)
				if err != nil {
					return nil, &DivisionError{Where: fmt.Sprintf("%s.weights[%d].clusterSelector", dv.where, j), Err: err}
				}
				rule.selector = sel
			}
			dv.weights = append(dv.weights, rule)
		}
		out = append(out, dv)
	}
	return out, nil
}

// weightOf is the weight of the member of Cluster name (cl nil when the set lacks it: no labels
// to match).
func (d division) weightOf(name string, cl *v1alpha1.Cluster) int64 {
	for _, w := range d.weights {
		switch {
		case w.cluster != "" && w.cluster == name:
			return int64(w.weight)
		case w.selector != nil && cl != nil && w.selector.Matches(labels.Set(cl.Labels)):
			return int64(w.weight)
		}
	}
	return 1
}

// Divide divides total across members of the given weights by largest remainder: each has
// least (or, when total is short of least for every member, total divided evenly), and what is
// left goes in proportion to the weights, the largest fractions first, ties to the heavier
// member, then to the earlier in names' order. The shares sum to total. With every weight 0, what
// is left goes evenly. names and weights are parallel; Divide keeps their order.
func Divide(total, least int32, names []string, weights []int64) []int32 {
	n := len(names)
	if n == 0 {
		return nil
	}
	base := int64(least)
	if base*int64(n) > int64(total) {
		base = int64(total) / int64(n)
	}
	rest := int64(total) - base*int64(n)
	w := slices.Clone(weights)
	var sum int64
	for _, x := range w {
		sum += x
	}
	if sum == 0 {
		for i := range w {
			w[i] = 1
		}
		sum = int64(n)
	}
	shares := make([]int32, n)
	rems := make([]int64, n)
	left := rest
	for i := range shares {
		q := rest * w[i]
		shares[i], rems[i] = int32(base+q/sum), q%sum
		left -= q / sum
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(rems[b], rems[a]), cmp.Compare(w[b], w[a]), cmp.Compare(names[a], names[b]))
	})
	for _, i := range order[:left] {
		shares[i]++
	}
	return shares
}

// shares are each member's share of d, by Cluster name, for the decision's members (cluster
// finds a member's Cluster; nil when unknown).
func (d division) shares(members []types.NamespacedName, cluster func(types.NamespacedName) *v1alpha1.Cluster) map[string]int32 {
	names := make([]string, len(members))
	weights := make([]int64, len(members))
	for i, k := range members {
		names[i], weights[i] = k.Name, d.weightOf(k.Name, cluster(k))
	}
	out := make(map[string]int32, len(members))
	for i, s := range Divide(d.total, d.min, names, weights) {
		out[names[i]] = s
	}
	return out
}

// shareOverride is member's share n of d, as an override of the workload's spec.replicas: its
// sum is of the division and the share alone, so a weight that moves no share moves no
// member's revision.
func (d division) shareOverride(n int32) override {
	sum := sha256.Sum256([]byte("divide\x00" + d.name + "\x00" + strconv.Itoa(int(n))))
	data := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	return override{name: "divide-" + d.name, sum: hex.EncodeToString(sum[:]),
		patches: []patch{{where: d.where, gk: d.gk, name: d.object, typ: v1alpha1.PatchMerge, data: data}}}
}

// withDivisions compiles rel's spec.divide into b, and checks that b's objects have each
// division's workload.
func (b *Bundle) withDivisions(rel *v1alpha1.Release) error {
	if len(rel.Spec.Divide) == 0 {
		return nil
	}
	if b.chart != nil && b.chart.helm {
		return &DivisionError{Where: "spec.divide", Err: errors.New("a chart in Helm mode is applied by Helm: a division overrides what the Release renders (manifests, or a chart in Render mode)")}
	}
	var err error
	if b.divisions, err = compileDivisions(rel); err != nil {
		return err
	}
	for i := range b.divisions {
		d := &b.divisions[i]
		if !slices.ContainsFunc(b.Objects, d.shareOverride(0).patches[0].targets) {
			what := d.gk.Kind
			if d.gk.Group != "" {
				what += "." + d.gk.Group
			}
			return &DivisionError{Where: d.where, Err: fmt.Errorf("divides %s %s, which the Release does not have: check the group, kind and objectName", what, d.object)}
		}
		if ignoresReplicas(rel, d.gk) {
			return &DivisionError{Where: d.where, Err: fmt.Errorf("spec.drift.ignore leaves %s's /spec/replicas to the members (an autoscaler's), so its shares would apply nothing: divide the autoscaler's bounds with spec.overrides instead, or stop ignoring /spec/replicas", d.gk.Kind)}
		}
		if d.byCapacity {
			if err := d.readPerPod(b.Objects); err != nil {
				return err
			}
		}
	}
	return nil
}

// ignoresReplicas: rel's spec.drift.ignore leaves /spec/replicas of kind gk to the members.
func ignoresReplicas(rel *v1alpha1.Release, gk schema.GroupKind) bool {
	if rel.Spec.Drift == nil {
		return false
	}
	for _, ig := range rel.Spec.Drift.Ignore {
		if ig.Group == gk.Group && ig.Kind == gk.Kind && (slices.Contains(ig.Paths, "/spec/replicas") || slices.Contains(ig.Paths, "/spec")) {
			return true
		}
	}
	return false
}

// DividedAmong is b with each member's shares of the Release's spec.divide, for the decision's
// members (in its order; cluster finds a member's Cluster, nil when the set lacks it): what
// the releases controller applies to each. A Capacity division takes the shares the Release's
// status.divisions keeps for these members, and divides them from the Clusters' figures when it
// keeps none. b itself is not changed; without spec.divide it is b.
func (b *Bundle) DividedAmong(members []types.NamespacedName, cluster func(types.NamespacedName) *v1alpha1.Cluster) *Bundle {
	return b.dividedWith(members, cluster, nil, time.Now())
}

// dividedWith is DividedAmong, with plans, if not nil, where a Capacity division looks for
// shares of its basis that the status does not have yet (the controller's own, from an earlier
// pass), and keeps those it divides.
func (b *Bundle) dividedWith(members []types.NamespacedName, cluster func(types.NamespacedName) *v1alpha1.Cluster, plans map[string]v1alpha1.ReleaseDivisionStatus, now time.Time) *Bundle {
	if len(b.divisions) == 0 {
		return b
	}
	out := *b
	out.shares, out.plans, out.divided = map[string][]share{}, nil, true
	for _, d := range b.divisions {
		var shares map[string]int32
		if d.byCapacity {
			plan := d.plan(b.rel, members, cluster, plans, now)
			out.plans = append(out.plans, plan)
			shares = planShares(plan)
		} else {
			shares = d.shares(members, cluster)
		}
		for name, n := range shares {
			out.shares[name] = append(out.shares[name], share{division: d, replicas: n})
		}
	}
	return &out
}

// share is a member's share of one division.
type share struct {
	division division
	replicas int32
}

// SharesFor are the shares of the member of cluster, as DividedAmong divided them; none for a
// member it was not divided among.
func (b *Bundle) SharesFor(cluster *v1alpha1.Cluster) []v1alpha1.ReleaseMemberShare {
	if cluster == nil {
		return nil
	}
	var out []v1alpha1.ReleaseMemberShare
	for _, s := range b.shares[cluster.Name] {
		out = append(out, v1alpha1.ReleaseMemberShare{Name: s.division.name, Replicas: s.replicas})
	}
	return out
}

// overridesFor are the overrides of the member of cluster: those of spec.overrides that choose
// it, then its shares; none for a nil cluster.
func (b *Bundle) overridesFor(cluster *v1alpha1.Cluster) []override {
	out := chosen(b.overrides, cluster)
	if cluster != nil {
		for _, s := range b.shares[cluster.Name] {
			out = append(out, s.division.shareOverride(s.replicas))
		}
	}
	return out
}

// revisionKept is the revision of the member of cluster, which the decision no longer names,
// with the shares it was last applied with: a member that left keeps its objects at the share
// it ran, and is judged at it.
func (b *Bundle) revisionKept(cluster *v1alpha1.Cluster, kept []v1alpha1.ReleaseMemberShare) string {
	out := chosen(b.overrides, cluster)
	for _, k := range kept {
		for _, d := range b.divisions {
			if d.name == k.Name {
				out = append(out, d.shareOverride(k.Replicas))
			}
		}
	}
	return memberRevision(b.Revision, out)
}
