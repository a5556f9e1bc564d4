package decision

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
)

// SliceSize is how many decisions one PlacementDecision holds at most, as the API allows.
const SliceSize = 100

// Chosen is one Cluster of a decision to write, the short reason it was chosen, and its rollout
// group (0 when the decision has none).
type Chosen struct {
	Cluster types.NamespacedName
	Reason  string
	Group   int
}

// GroupsAnnotation, on a slice, holds the rollout group of each of its decisions, in order,
// comma-separated: what a reader needs to roll out in stages, and the scheduler to keep each
// member's group across restarts. Absent when every group is 0.
const GroupsAnnotation = "clusterregistry.k8s.io/rollout-groups"

// WriteOptions say who writes a decision.
type WriteOptions struct {
	// SchedulerName is written in each slice, and a slice of the key written by another
	// scheduler is never overwritten. Required.
	SchedulerName string
	// Owner, if set, owns each slice (the Placement the decision is for), so that the slices go
	// with it.
	Owner *metav1.OwnerReference
	// Existing, if set, are the key's slices as the caller just listed them (to read the
	// previous decision, say): Write takes them for what is there instead of listing again.
	Existing *cpv1alpha1.PlacementDecisionList
}

// Written says what Write did.
type Written struct {
	Created, Updated, Deleted, Unchanged int
}

// Changed reports whether Write wrote anything.
func (w Written) Changed() bool { return w.Created+w.Updated+w.Deleted > 0 }

// ForeignDecisionError: a slice of the decision key was written by another scheduler. Write
// leaves it, and the decision, alone.
type ForeignDecisionError struct {
	Namespace, Slice, Scheduler string
}

func (e *ForeignDecisionError) Error() string {
	return fmt.Sprintf("PlacementDecision %s/%s belongs to scheduler %q; it is left alone", e.Namespace, e.Slice, e.Scheduler)
}

// Write makes the decision of key in namespace what chosen says: slices named KEY-0, KEY-1, ...
// of at most SliceSize decisions each, labelled with the decision key and their index, each
// naming the ClusterProfile of its Cluster (of namespace: another namespace's Cluster is an
// error). It writes only what differs, and deletes the slices no longer needed after writing the
// others. An empty chosen is one empty slice: decided, none, which a reader tells apart from no
// decision at all.
func Write(ctx context.Context, client cpversioned.Interface, namespace, key string, chosen []Chosen, opts WriteOptions) (Written, error) {
	var w Written
	if opts.SchedulerName == "" {
		return w, fmt.Errorf("decision: WriteOptions.SchedulerName is required")
	}
	if msgs := append(validation.IsValidLabelValue(key), validation.IsDNS1123Subdomain(key+"-0")...); len(msgs) > 0 || key == "" {
		return w, fmt.Errorf("decision key %q: want a lower-case name that is also a label value: %v", key, msgs)
	}
	for _, c := range chosen {
		if c.Cluster.Namespace != namespace {
			return w, fmt.Errorf("decision %s in namespace %s: Cluster %s is of another namespace; a decision names its own cluster set's members", key, namespace, c.Cluster)
		}
	}
	pds := client.ApisV1alpha1().PlacementDecisions(namespace)
	list := opts.Existing
	if list == nil {
		var err error
		if list, err = List(ctx, client, namespace, key); err != nil {
			return w, err
		}
	}
	existing := map[string]*cpv1alpha1.PlacementDecision{}
	for i := range list.Items {
		pd := &list.Items[i]
		if pd.Labels[cpv1alpha1.DecisionKeyLabel] != key {
			continue // not of this key: Existing was listed for another
		}
		if pd.SchedulerName != opts.SchedulerName {
			return w, &ForeignDecisionError{Namespace: namespace, Slice: pd.Name, Scheduler: pd.SchedulerName}
		}
		existing[pd.Name] = pd
	}
	want := desired(namespace, key, chosen, opts)
	for _, pd := range want {
		old := existing[pd.Name]
		delete(existing, pd.Name)
		switch {
		case old == nil:
			if _, err := pds.Create(ctx, pd, metav1.CreateOptions{FieldManager: opts.SchedulerName}); err != nil {
				return w, fmt.Errorf("creating PlacementDecision %s/%s: %w", namespace, pd.Name, err)
			}
			w.Created++
		case equality.Semantic.DeepEqual(old.Decisions, pd.Decisions) && equality.Semantic.DeepEqual(old.Labels, pd.Labels) &&
			equality.Semantic.DeepEqual(old.OwnerReferences, pd.OwnerReferences) && old.Annotations[GroupsAnnotation] == pd.Annotations[GroupsAnnotation]:
			w.Unchanged++
		default:
			update := old.DeepCopy()
			update.Decisions, update.Labels, update.OwnerReferences = pd.Decisions, pd.Labels, pd.OwnerReferences
			if g, ok := pd.Annotations[GroupsAnnotation]; ok {
				metav1.SetMetaDataAnnotation(&update.ObjectMeta, GroupsAnnotation, g)
			} else {
				delete(update.Annotations, GroupsAnnotation)
			}
			if _, err := pds.Update(ctx, update, metav1.UpdateOptions{FieldManager: opts.SchedulerName}); err != nil {
				return w, fmt.Errorf("updating PlacementDecision %s/%s: %w", namespace, pd.Name, err)
			}
			w.Updated++
		}
	}
	stale := make([]string, 0, len(existing))
	for name := range existing {
		stale = append(stale, name)
	}
	slices.Sort(stale)
	for _, name := range stale {
		uid := existing[name].UID
		err := pds.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) {
			return w, fmt.Errorf("deleting PlacementDecision %s/%s: %w", namespace, name, err)
		}
		w.Deleted++
	}
	return w, nil
}

// desired is the slices of a decision.
func desired(namespace, key string, chosen []Chosen, opts WriteOptions) []*cpv1alpha1.PlacementDecision {
	grouped := slices.ContainsFunc(chosen, func(c Chosen) bool { return c.Group != 0 })
	var out []*cpv1alpha1.PlacementDecision
	for i := 0; i == 0 || i*SliceSize < len(chosen); i++ {
		pd := &cpv1alpha1.PlacementDecision{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: namespace,
				Name:      key + "-" + strconv.Itoa(i),
				Labels:    map[string]string{cpv1alpha1.DecisionKeyLabel: key, cpv1alpha1.DecisionIndexLabel: strconv.Itoa(i)},
			},
			Decisions:     []cpv1alpha1.ClusterDecision{},
			SchedulerName: opts.SchedulerName,
		}
		if opts.Owner != nil {
			pd.OwnerReferences = []metav1.OwnerReference{*opts.Owner}
		}
		var groups []string
		for _, c := range chosen[i*SliceSize : min(len(chosen), (i+1)*SliceSize)] {
			pd.Decisions = append(pd.Decisions, cpv1alpha1.ClusterDecision{
				ClusterProfileRef: cpv1alpha1.ClusterProfileReference{Name: c.Cluster.Name}, Reason: c.Reason})
			groups = append(groups, strconv.Itoa(c.Group))
		}
		if grouped {
			pd.Annotations = map[string]string{GroupsAnnotation: strings.Join(groups, ",")}
		}
		out = append(out, pd)
	}
	return out
}

// Delete deletes the slices of key in namespace that scheduler wrote, and says how many: the
// placement is gone, and a reader then finds no decision (ErrNoDecision) rather than an empty one.
func Delete(ctx context.Context, client cpversioned.Interface, namespace, key, scheduler string) (int, error) {
	pds := client.ApisV1alpha1().PlacementDecisions(namespace)
	list, err := pds.List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{cpv1alpha1.DecisionKeyLabel: key}).String()})
	if err != nil {
		return 0, fmt.Errorf("listing the PlacementDecisions of %s in namespace %s: %w", key, namespace, err)
	}
	deleted := 0
	for _, pd := range list.Items {
		if pd.SchedulerName != scheduler {
			continue
		}
		uid := pd.UID
		if err := pds.Delete(ctx, pd.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return deleted, fmt.Errorf("deleting PlacementDecision %s/%s: %w", namespace, pd.Name, err)
		}
		deleted++
	}
	return deleted, nil
}
