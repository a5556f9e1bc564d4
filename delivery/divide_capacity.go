package delivery

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Capacity division weighs each member by how many of the workload's Pods fit in its room, as
// its Cluster's status.resources says (what a capacity controller last wrote): a figure that
// moves with every Pod. So it is divided once for a basis (the division as written and the
// members it divides among) and kept: the Release's owner writes it in status.divisions, where
// a restarted controller and every replica of a sharded one read it, and until that write is
// read, the controller that divided it keeps it itself (plans). Only a new basis divides again.
// A member's own share is added back to its room, so that its own Pods do not count against it.

// capacityFigureAge is how old a member's status.resources may be to weigh it: three of the
// capacity controller's heartbeats, as a Placement's fit judges by default.
const capacityFigureAge = time.Duration(v1alpha1.DefaultMaxResourceAgeSeconds) * time.Second

// readPerPod sets what one of the division's Pods asks, from its workload's spec.template in
// objs, as the scheduler counts a Pod's requests.
func (d *division) readPerPod(objs []*unstructured.Unstructured) error {
	i := slices.IndexFunc(objs, d.shareOverride(0).patches[0].targets)
	raw, found, _ := unstructured.NestedMap(objs[i].Object, "spec", "template")
	if !found {
		return &DivisionError{Where: d.where, Err: fmt.Errorf("by Capacity weighs members by the Pods of %s %s's spec.template, which it has none of: divide it by weights", d.gk.Kind, d.object)}
	}
	var tmpl corev1.PodTemplateSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
		return &DivisionError{Where: d.where, Err: fmt.Errorf("%s %s's spec.template: %w", d.gk.Kind, d.object, err)}
	}
	req := resourcehelper.PodRequests(&corev1.Pod{Spec: tmpl.Spec}, resourcehelper.PodResourcesOptions{})
	for name, q := range req {
		if q.Sign() <= 0 {
			delete(req, name)
		}
	}
	if len(req) == 0 {
		return &DivisionError{Where: d.where, Err: errors.New("by Capacity weighs members by how many of the workload's Pods fit, and its Pod template requests nothing: give its containers resources.requests, or divide it by weights")}
	}
	d.perPod = req
	return nil
}

// basis is a hash of the division as written and of the members it divides among, in name order.
func (d division) basis(members []types.NamespacedName) string {
	names := make([]string, len(members))
	for i, k := range members {
		names[i] = k.Name
	}
	slices.Sort(names)
	h := sha256.New()
	h.Write([]byte(d.sum))
	for _, n := range names {
		h.Write([]byte{0})
		h.Write([]byte(n))
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// plan is d's shares among members: those rel's status.divisions keeps for their basis, else
// those plans keeps, else divided now from the Clusters' figures (and kept in plans).
func (d division) plan(rel *v1alpha1.Release, members []types.NamespacedName, cluster func(types.NamespacedName) *v1alpha1.Cluster,
	plans map[string]v1alpha1.ReleaseDivisionStatus, now time.Time) v1alpha1.ReleaseDivisionStatus {
	basis := d.basis(members)
	var before *v1alpha1.ReleaseDivisionStatus
	if rel != nil {
		if i := slices.IndexFunc(rel.Status.Divisions, func(s v1alpha1.ReleaseDivisionStatus) bool { return s.Name == d.name }); i >= 0 {
			before = &rel.Status.Divisions[i]
		}
	}
	if before != nil && before.Basis == basis {
		return *before
	}
	if p, ok := plans[d.name]; ok && p.Basis == basis {
		return p
	}
	if p, ok := plans[d.name]; ok && before == nil {
		before = &p
	}
	kept := map[string]int32{}
	if before != nil {
		kept = planShares(*before)
	}
	names := make([]string, len(members))
	weights := make([]int64, len(members))
	for i, k := range members {
		names[i], weights[i] = k.Name, d.podsThatFit(cluster(k), kept[k.Name], now)
	}
	out := v1alpha1.ReleaseDivisionStatus{Name: d.name, Basis: basis}
	for i, n := range Divide(d.total, d.min, names, weights) {
		out.Shares = append(out.Shares, v1alpha1.ReleaseDivisionShare{Cluster: names[i], Replicas: n})
	}
	slices.SortFunc(out.Shares, func(a, b v1alpha1.ReleaseDivisionShare) int { return cmp.Compare(a.Cluster, b.Cluster) })
	if plans != nil {
		plans[d.name] = out
	}
	return out
}

// podsThatFit is how many of the division's Pods fit in what cl's member has free, its own
// share of them (own) added back: the fewest over the resources a Pod asks. 0 for a member whose
// figures are missing or older than capacityFigureAge.
func (d division) podsThatFit(cl *v1alpha1.Cluster, own int32, now time.Time) int64 {
	if cl == nil || cl.Status.Resources == nil || now.Sub(cl.Status.Resources.LastObservedTime.Time) > capacityFigureAge {
		return 0
	}
	free := cl.Status.Resources.Free()
	fit := int64(math.MaxInt32)
	for name, q := range d.perPod {
		per := q.AsApproximateFloat64()
		room := per * float64(own)
		if f, ok := free[name]; ok {
			room += f.AsApproximateFloat64()
		}
		fit = min(fit, int64(math.Floor(room/per+1e-9)))
	}
	return fit
}

// planShares are a plan's shares, by Cluster name.
func planShares(p v1alpha1.ReleaseDivisionStatus) map[string]int32 {
	out := make(map[string]int32, len(p.Shares))
	for _, s := range p.Shares {
		out[s.Cluster] = s.Replicas
	}
	return out
}

// capacityBound is why b cannot divide among n members: a Capacity division keeps its shares in
// the Release's status, for at most MaxCapacityDivisionMembers.
func (b *Bundle) capacityBound(n int) error {
	for _, d := range b.divisions {
		if d.byCapacity && n > v1alpha1.MaxCapacityDivisionMembers {
			return &DivisionError{Where: d.where, Err: fmt.Errorf("by Capacity divides across at most %d members, and the decision names %d: divide by weights, which has no bound",
				v1alpha1.MaxCapacityDivisionMembers, n)}
		}
	}
	return nil
}
