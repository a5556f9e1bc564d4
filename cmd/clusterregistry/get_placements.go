package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

const (
	getPlacementsLong = `get placements shows the cluster set's Placements: how many members each asks for and how many
its decision chose, whether it is Satisfied and, with -o wide, its candidates counted by the one
reason each is in or out, and the condition's message. explain-placement NAME lists those
candidates one by one.

As kubectl get: -w follows changes (a row per change, until interrupted; --watch-only skips the
list first), --no-headers, --show-labels, -L adds a column per label key, --sort-by sorts by a
JSONPath of the Placement, and -o yaml, json, name, jsonpath=..., go-template=... and
custom-columns=HEADER:JSONPATH,... print what kubectl's printers print.`

	getPlacementsExample = `  # The fleet cluster set's Placements
  clusterregistry get placements -n fleet

  # Every cluster set's, with their candidates by reason
  clusterregistry get placements -A -o wide

  # Follow the web placement's decision as the scheduler writes it
  clusterregistry get placements web -n fleet -w

  # Columns of your choosing, newest first
  clusterregistry get placements -n fleet --sort-by .metadata.creationTimestamp \
    -o custom-columns=NAME:.metadata.name,CHOSEN:.status.chosen

  # One as YAML, status included
  clusterregistry get placements web -n fleet -o yaml`
)

func newGetPlacements(f *factory) *cobra.Command {
	o := newGetOptions(placementKind, "Placement", "Placements")
	cmd := &cobra.Command{
		Use:     "placements [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR] [-w] [-o wide|yaml|json|name|jsonpath=...|custom-columns=...]",
		Aliases: []string{"placement", "rpl"},
		Short:   "Show the Placements: count, chosen, Satisfied, candidates by reason",
		Long:    getPlacementsLong,
		Example: getPlacementsExample,
		Args:    cobra.ArbitraryArgs,
		RunE:    runOptions(f, o),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			return placementNames(f), cobra.ShellCompDirectiveNoFileComp
		},
	}
	o.addFlags(cmd)
	return cmd
}

// placementKind is get placements' kind: the registry's Placements, by namespace and name.
func placementKind(reg *registry) getKind[v1alpha1.Placement, *v1alpha1.Placement] {
	k := registryKind[v1alpha1.Placement, *v1alpha1.Placement, *v1alpha1.PlacementList]("Placement", "Placements",
		reg.Clusters.ClusterregistryV1alpha1().Placements, func(l *v1alpha1.PlacementList) []v1alpha1.Placement { return l.Items })
	k.table = func(_ context.Context, items []v1alpha1.Placement, _ bool) *metav1.Table {
		return placementTable(items)
	}
	k.order = byNamespacedName[v1alpha1.Placement]
	return k
}

// placementTable is the overview of Placements: what each asks for, what its decision chose,
// and, with -o wide, its candidates by reason and its condition's message.
func placementTable(items []v1alpha1.Placement) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Count", Type: "string"},
		{Name: "Chosen", Type: "integer"},
		{Name: "Satisfied", Type: "string"},
		{Name: "Reason", Type: "string"},
		{Name: "Age", Type: "string"},
		{Name: "Candidates", Type: "string", Priority: 1},
		{Name: "Message", Type: "string", Priority: 1},
	}}
	for i := range items {
		p := &items[i]
		count := "all"
		if p.Spec.Count != nil {
			count = fmt.Sprint(*p.Spec.Count)
		}
		satisfied, reason, message := "Unknown", "NotDecided", "not decided yet"
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PlacementSatisfied); c != nil {
			satisfied, reason, message = string(c.Status), c.Reason, c.Message
		}
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.PlacementMisconfigured); c != nil && c.Status == metav1.ConditionTrue {
			reason, message = v1alpha1.PlacementMisconfigured, c.Message
		}
		if p.Status.ObservedGeneration != p.Generation && reason != v1alpha1.PlacementMisconfigured {
			message = fmt.Sprintf("(status of generation %d; the spec is at %d) %s", p.Status.ObservedGeneration, p.Generation, message)
		}
		var candidates []string
		for _, c := range p.Status.Candidates {
			candidates = append(candidates, fmt.Sprintf("%s=%d", c.Reason, c.Count))
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{p.Name, count, p.Status.Chosen, satisfied, reason,
				duration.HumanDuration(metav1.Now().Sub(p.CreationTimestamp.Time)), orDash(strings.Join(candidates, ",")),
				printers.EscapeTerminal(message)},
			Object: runtime.RawExtension{Object: p},
		})
	}
	return t
}
