package main

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

const (
	getReleasesLong = `get releases shows the cluster set's Releases: the Placement each follows, the revision it
delivers, how many members its decision names and how many run that revision healthy, whether it
is Available and why it stands where it does; with -o wide, the rollout's wave, the members counted
by phase, the message of the worst member (or of the Stalled condition), and what spec.feedback
read across the members: a value all of them read once, values that differ with how many members
read each. describe release NAME lists the members one by one.

As kubectl get: -w follows changes, --no-headers, --show-labels, -L, --sort-by, and -o yaml,
json, name, jsonpath=..., go-template=... and custom-columns=... print what kubectl's printers
print.`

	getReleasesExample = `  # The fleet cluster set's Releases
  clusterregistry get releases -n fleet

  # Every cluster set's, with waves and members by phase
  clusterregistry get releases -A -o wide

  # Follow a rollout
  clusterregistry get releases web -n fleet -w`
)

func newGetReleases(f *factory) *cobra.Command {
	o := newGetOptions(releaseKind, "Release", "Releases")
	cmd := &cobra.Command{
		Use:     "releases [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR] [-w] [-o wide|yaml|json|name|jsonpath=...|custom-columns=...]",
		Aliases: []string{"release", "rrel"},
		Short:   "Show the Releases: placement, revision, members ready, Available, waves and phases",
		Long:    getReleasesLong,
		Example: getReleasesExample,
		Args:    cobra.ArbitraryArgs,
		RunE:    runOptions(f, o),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			return releaseNames(f), cobra.ShellCompDirectiveNoFileComp
		},
	}
	o.addFlags(cmd)
	return cmd
}

// releaseKind is get releases' kind: the registry's Releases, by namespace and name.
func releaseKind(reg *registry) getKind[v1alpha1.Release, *v1alpha1.Release] {
	k := registryKind[v1alpha1.Release, *v1alpha1.Release, *v1alpha1.ReleaseList]("Release", "Releases",
		reg.Clusters.ClusterregistryV1alpha1().Releases, func(l *v1alpha1.ReleaseList) []v1alpha1.Release { return l.Items })
	k.table = func(ctx context.Context, items []v1alpha1.Release, wide bool) *metav1.Table {
		var feedback map[types.UID]string
		if wide {
			feedback = releaseFeedback(ctx, reg.Clusters, items)
		}
		return releaseTable(items, feedback)
	}
	k.order = byNamespacedName[v1alpha1.Release]
	return k
}

// releasePlacement is what a Release follows, as a person names it.
func releasePlacement(r *v1alpha1.Release) string {
	if r.Spec.Placement.Name != "" {
		return r.Spec.Placement.Name
	}
	return "decision-key=" + r.DecisionKey()
}

// releaseState is a Release's Available status, the reason it stands where it does, and the
// message that says most: Stalled's when it is stalled, else the worst member's.
func releaseState(r *v1alpha1.Release) (available, reason, message string) {
	available, reason, message = "Unknown", "NotDelivered", "not delivered yet"
	if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseAvailable); c != nil {
		available = string(c.Status)
	}
	if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseProgressing); c != nil {
		reason, message = c.Reason, c.Message
	}
	if c := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled); c != nil && c.Status == metav1.ConditionTrue {
		reason, message = c.Reason, c.Message
	} else if len(r.Status.Worst) > 0 {
		w := r.Status.Worst[0]
		message = fmt.Sprintf("%s: %s %s", w.Cluster, w.Phase, strings.TrimSpace(w.Reason+" "+w.Message))
	}
	if r.Status.ObservedGeneration != r.Generation {
		message = fmt.Sprintf("(status of generation %d; the spec is at %d) %s", r.Status.ObservedGeneration, r.Generation, message)
	}
	return available, reason, message
}

// releaseTable is the overview of Releases; feedback is the Feedback column's cells, by
// Release, when -o wide asked for them.
func releaseTable(items []v1alpha1.Release, feedback map[types.UID]string) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Placement", Type: "string"},
		{Name: "Revision", Type: "string"},
		{Name: "Members", Type: "integer"},
		{Name: "Ready", Type: "integer"},
		{Name: "Available", Type: "string"},
		{Name: "Reason", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Wave", Type: "string", Priority: 1},
		{Name: "Phases", Type: "string", Priority: 1},
		{Name: "Message", Type: "string", Priority: 1},
		{Name: "Feedback", Type: "string", Priority: 1},
	}}
	for i := range items {
		r := &items[i]
		available, reason, message := releaseState(r)
		wave := "-"
		if r.Status.Waves > 0 {
			wave = fmt.Sprintf("%d/%d", r.Status.Wave, r.Status.Waves)
		}
		var phases []string
		for _, p := range r.Status.Phases {
			phases = append(phases, fmt.Sprintf("%s=%d", p.Phase, p.Count))
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{r.Name, printers.EscapeTerminal(releasePlacement(r)), orDash(r.Status.Revision), r.Status.Members, r.Status.Ready, available, reason,
				duration.HumanDuration(metav1.Now().Sub(r.CreationTimestamp.Time)), wave, orDash(strings.Join(phases, ",")),
				printers.EscapeTerminal(message), cmp.Or(feedback[r.UID], "-")},
			Object: runtime.RawExtension{Object: r},
		})
	}
	return t
}
