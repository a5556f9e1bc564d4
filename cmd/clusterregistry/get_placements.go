package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clientset/versioned/scheme"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

const (
	getPlacementsLong = `get placements shows the cluster set's Placements: how many members each asks for and how many
its decision chose, whether it is Satisfied and, with -o wide, its candidates counted by the one
reason each is in or out, and the condition's message. explain-placement NAME lists those
candidates one by one.

-o yaml, json, name, jsonpath=... and go-template=... print the Placements as kubectl's printers
do.`

	getPlacementsExample = `  # The fleet cluster set's Placements
  clusterregistry get placements -n fleet

  # Every cluster set's, with their candidates by reason
  clusterregistry get placements -A -o wide

  # One as YAML, status included
  clusterregistry get placements web -n fleet -o yaml`
)

// GetPlacementsOptions are get placements' flags, in the manner of kubectl's get.
type GetPlacementsOptions struct {
	PrintFlags    *genericclioptions.PrintFlags
	AllNamespaces bool
	Selector      string
	Names         []string
	NoHeaders     bool

	namespace string
	selector  labels.Selector
	wide      bool
	printer   printers.ResourcePrinter // nil for the table
	registry  versioned.Interface
	reg       *registry // for ClusterSetExists
	out       io.Writer
}

func newGetPlacements(f *factory) *cobra.Command {
	o := &GetPlacementsOptions{PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme)}
	cmd := &cobra.Command{
		Use:     "placements [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR] [-o wide|yaml|json|name|jsonpath=...]",
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
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "wide, or as kubectl get: " + strings.Join(o.PrintFlags.AllowedFormats(), ", ")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace (cluster set)")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector over the Placements")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "leave out the header row")
	return cmd
}

// Complete parses the selector and the output format.
func (o *GetPlacementsOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.Names, o.out = args, cmd.OutOrStdout()
	var err error
	if o.selector, err = labels.Parse(o.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	switch format := *o.PrintFlags.OutputFormat; format {
	case "":
	case "wide":
		o.wide = true
	default:
		if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
			return usageError{fmt.Errorf("-o %s: want wide, or one of %s", format, strings.Join(o.PrintFlags.AllowedFormats(), ", "))}
		}
	}
	reg, err := f.Registry()
	if err != nil {
		return err
	}
	o.namespace, o.registry, o.reg = reg.Namespace, reg.Clusters, reg
	if o.AllNamespaces {
		o.namespace = metav1.NamespaceAll
	}
	return nil
}

// Validate refuses flags that contradict each other.
func (o *GetPlacementsOptions) Validate() error {
	switch {
	case len(o.Names) > 0 && o.AllNamespaces:
		return usageError{errors.New("names and -A conflict: a name is looked up in one namespace, -n's")}
	case len(o.Names) > 0 && !o.selector.Empty():
		return usageError{errors.New("names and -l conflict: give one or the other")}
	}
	return nil
}

// Run lists the Placements (or gets those named) and prints them.
func (o *GetPlacementsOptions) Run(ctx context.Context) error {
	placements := o.registry.ClusterregistryV1alpha1().Placements(o.namespace)
	var items []v1alpha1.Placement
	if len(o.Names) == 0 {
		list, err := placements.List(ctx, metav1.ListOptions{LabelSelector: o.selector.String()})
		if err != nil {
			return fmt.Errorf("listing the Placements of %s: %w", describeNamespace(o.namespace), err)
		}
		if len(list.Items) == 0 && o.namespace != metav1.NamespaceAll {
			if err := o.reg.ClusterSetExists(ctx, o.namespace); err != nil {
				return err
			}
		}
		items = list.Items
	}
	var missing []string
	for _, name := range o.Names {
		p, err := placements.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
			continue
		case err != nil:
			return err
		}
		items = append(items, *p)
	}
	if err := o.print(items); err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("no Placement %s in namespace %s", strings.Join(missing, ", "), o.namespace)
	}
	if o.printer == nil && len(items) == 0 && len(o.Names) == 0 {
		fmt.Fprintf(o.out, "No Placements found in %s.\n", describeNamespace(o.namespace))
	}
	return nil
}

func (o *GetPlacementsOptions) print(items []v1alpha1.Placement) error {
	if len(items) == 0 {
		return nil
	}
	if o.printer != nil {
		objs := make([]runtime.Object, len(items))
		for i := range items {
			items[i].ManagedFields = nil
			items[i].APIVersion, items[i].Kind = v1alpha1.SchemeGroupVersion.String(), "Placement"
			objs[i] = &items[i]
		}
		return printObjects(o.out, o.printer, *o.PrintFlags.OutputFormat, objs, len(o.Names) == 1)
	}
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
	return printers.NewTablePrinter(printers.PrintOptions{NoHeaders: o.NoHeaders, Wide: o.wide, WithNamespace: o.namespace == metav1.NamespaceAll}).PrintObj(t, o.out)
}
