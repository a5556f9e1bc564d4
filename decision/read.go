package decision

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/multicluster"
)

// CRDManifest is where SIG Multicluster's PlacementDecision CRD comes from, at the version of
// sigs.k8s.io/cluster-inventory-api this module is built with.
const CRDManifest = "https://raw.githubusercontent.com/kubernetes-sigs/cluster-inventory-api/v0.1.2/config/crd/bases/multicluster.x-k8s.io_placementdecisions.yaml"

// Decision is one placement decision, read from its slices.
type Decision struct {
	// Namespace and Key name it: its slices' namespace and decision-key label.
	Namespace, Key string
	// Clusters are the chosen Clusters (the ClusterProfiles' namespaces and names), in the
	// slices' decision-index order and then their own, each once.
	Clusters []types.NamespacedName
	// Reasons are the decisions' reasons by Cluster, where the writer gave one.
	Reasons map[types.NamespacedName]string
	// Groups are the Clusters' rollout groups, numbered from 0 as the placement numbers them,
	// where the slices say (GroupsAnnotation). A Cluster the slices give no group is not in the
	// map: "group 0" and "no group" are different facts, and a rollout in groups goes through
	// group 0 first and the Clusters without a group last.
	Groups map[types.NamespacedName]int
	// Refused are the references the decision may not make: to a ClusterProfile of another
	// namespace. They are not in Clusters.
	Refused []cpv1alpha1.ClusterProfileReference
	// Slices are the PlacementDecision objects read, in order.
	Slices []string
}

// ErrNoDecision: no PlacementDecision of the namespace has the decision key (not written yet, or
// deleted with its placement).
var ErrNoDecision = errors.New("no PlacementDecision has this decision key")

// Read reads the decision of key in namespace: every PlacementDecision there labelled
// multicluster.x-k8s.io/decision-key=key. It returns an error wrapping ErrNoDecision when there
// is none, so that a caller never takes a missing decision for an empty one.
func Read(ctx context.Context, client cpversioned.Interface, namespace, key string) (*Decision, error) {
	if namespace == "" || key == "" {
		return nil, errors.New("decision: a namespace and a decision key are required")
	}
	list, err := List(ctx, client, namespace, key)
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("decision %s in namespace %s: %w", key, namespace, ErrNoDecision)
	}
	return FromSlices(namespace, key, list.Items), nil
}

// List lists the slices of key in namespace, whoever wrote them: for FromSlices, and for Write's
// WriteOptions.Existing, so that a writer that reads the decision first lists it once.
func List(ctx context.Context, client cpversioned.Interface, namespace, key string) (*cpv1alpha1.PlacementDecisionList, error) {
	selector := labels.SelectorFromSet(labels.Set{cpv1alpha1.DecisionKeyLabel: key}).String()
	list, err := client.ApisV1alpha1().PlacementDecisions(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("listing the PlacementDecisions of %s in namespace %s: %w", key, namespace, err)
	}
	return list, nil
}

// FromSlices is the decision that slices make: ordered by their decision-index label (a slice
// without one after those with, by name), references outside namespace refused, each Cluster once.
func FromSlices(namespace, key string, items []cpv1alpha1.PlacementDecision) *Decision {
	ordered := slices.Clone(items)
	index := func(pd *cpv1alpha1.PlacementDecision) int {
		if i, err := strconv.Atoi(pd.Labels[cpv1alpha1.DecisionIndexLabel]); err == nil && i >= 0 {
			return i
		}
		return int(^uint(0) >> 1)
	}
	slices.SortStableFunc(ordered, func(a, b cpv1alpha1.PlacementDecision) int {
		return cmp.Or(cmp.Compare(index(&a), index(&b)), cmp.Compare(a.Name, b.Name))
	})
	d := &Decision{Namespace: namespace, Key: key, Reasons: map[types.NamespacedName]string{}, Groups: map[types.NamespacedName]int{}}
	seen := map[types.NamespacedName]bool{}
	for _, pd := range ordered {
		d.Slices = append(d.Slices, pd.Name)
		groups := strings.Split(pd.Annotations[GroupsAnnotation], ",")
		for i, cd := range pd.Decisions {
			ref := cd.ClusterProfileRef
			ns := cmp.Or(ref.Namespace, pd.Namespace, namespace)
			if ns != namespace || ref.Name == "" {
				d.Refused = append(d.Refused, ref)
				continue
			}
			c := types.NamespacedName{Namespace: ns, Name: ref.Name}
			if seen[c] {
				continue
			}
			seen[c] = true
			d.Clusters = append(d.Clusters, c)
			if cd.Reason != "" {
				d.Reasons[c] = cd.Reason
			}
			if len(groups) == len(pd.Decisions) {
				if g, err := strconv.Atoi(groups[i]); err == nil && g >= 0 {
					d.Groups[c] = g
				}
			}
		}
	}
	return d
}

// Members are the decision's Clusters among from (a Fleet's Members, or MembersOf a list), in the
// decision's order, and those it names that from lacks (not in the registry, or not selected):
// the caller says what those mean.
func (d *Decision) Members(from []*multicluster.Member) (members []*multicluster.Member, missing []types.NamespacedName) {
	byName := make(map[types.NamespacedName]*multicluster.Member, len(from))
	for _, m := range from {
		byName[m.Name()] = m
	}
	for _, c := range d.Clusters {
		if m := byName[c]; m != nil {
			members = append(members, m)
		} else {
			missing = append(missing, c)
		}
	}
	return members, missing
}
