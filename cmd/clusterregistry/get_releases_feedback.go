package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// feedbackShown is how many distinct values of one feedback a row names; the rest are counted.
const feedbackShown = 3

// releaseFeedback is get releases -o wide's Feedback column: for each Release, what its
// spec.feedback read across its members, by name, from its status slices (the Release's own
// status holds no per-member values). A value every member read is shown once; values that
// differ are shown with how many members read each, the commonest first, so that a fleet that
// runs two versions of an operator says so in one row. A Release whose slices could not be read
// says why in the cell, rather than looking as if nothing was read.
func releaseFeedback(ctx context.Context, clusters versioned.Interface, items []v1alpha1.Release) map[types.UID]string {
	out := map[types.UID]string{}
	byNamespace := map[string][]*v1alpha1.Release{}
	for i := range items {
		if len(items[i].Spec.Feedback) > 0 {
			byNamespace[items[i].Namespace] = append(byNamespace[items[i].Namespace], &items[i])
		}
	}
	for ns, releases := range byNamespace {
		list, err := clusters.ClusterregistryV1alpha1().ReleaseStatusSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: slicesOf(releases)})
		for _, r := range releases {
			if err != nil {
				out[r.UID] = "<slices unreadable: " + string(apierrors.ReasonForError(err)) + ">"
				continue
			}
			out[r.UID] = summarizeFeedback(v1alpha1.MembersOf(r, list.Items))
		}
	}
	return out
}

// slicesOf selects the status slices of releases, all of one namespace: by their names when they
// are few (get -w prints one Release an event, and a set holds up to 100 slices a Release), else
// every Release's.
func slicesOf(releases []*v1alpha1.Release) string {
	if len(releases) > 20 {
		return v1alpha1.ReleaseLabel
	}
	names := make([]string, len(releases))
	for i, r := range releases {
		names[i] = r.Name
	}
	req, err := labels.NewRequirement(v1alpha1.ReleaseLabel, selection.In, names)
	if err != nil { // a name that is no label value: no slice carries it either
		return v1alpha1.ReleaseLabel
	}
	return labels.NewSelector().Add(*req).String()
}

// summarizeFeedback is "name=value" per feedback name, sorted by name: the value alone when the
// members agree, else each value with its count ("version=1.2(7),1.1(3)"), the commonest first,
// at most feedbackShown of them and "+N" for the rest. A member that reported a name with an
// empty value counts as "<none>".
func summarizeFeedback(members []v1alpha1.ReleaseMemberStatus) string {
	counts := map[string]map[string]int{}
	for _, m := range members {
		for _, f := range m.Feedback {
			if counts[f.Name] == nil {
				counts[f.Name] = map[string]int{}
			}
			counts[f.Name][cmp.Or(f.Value, "<none>")]++
		}
	}
	var parts []string
	for _, name := range sortedKeys(counts) {
		parts = append(parts, name+"="+summarizeValues(counts[name]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return printers.EscapeTerminal(strings.Join(parts, " "))
}

// summarizeValues is one feedback name's values with their counts, the commonest first.
func summarizeValues(counts map[string]int) string {
	values := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b))
	})
	if len(values) == 1 {
		return values[0]
	}
	var shown []string
	for _, v := range values[:min(len(values), feedbackShown)] {
		shown = append(shown, fmt.Sprintf("%s(%d)", v, counts[v]))
	}
	if rest := len(values) - feedbackShown; rest > 0 {
		shown = append(shown, fmt.Sprintf("+%d", rest))
	}
	return strings.Join(shown, ",")
}
