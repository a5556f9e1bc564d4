package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/jsonpath"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clientset/versioned/scheme"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

var (
	getLong = `get shows the fleet: each Cluster it selects with its Ready state and reason, the member's
version, when the health controller last reported on it, the credential it is reached with
and, where the registry holds it, when that credential expires (the token join stored; never the
token itself). Members not Ready come first, unless --sort-by says otherwise.

As kubectl get: -w follows changes (a row per change, until interrupted; --watch-only skips the
list first), --no-headers, --show-labels, -L adds a column per label key, --sort-by sorts by a
JSONPath of the Cluster, and -o wide, yaml, json, name, jsonpath=..., go-template=... and
custom-columns=HEADER:JSONPATH,... print what kubectl's printers print.

get placements shows the Placements instead (see get placements --help).`

	getExample = `  # The fleet cluster set
  clusterregistry get -n fleet

  # Every cluster set's production members, with endpoints and messages
  clusterregistry get -A -l env=prod -o wide

  # Follow Ready as the health controller writes it, with the region label as a column
  clusterregistry get -n fleet -w -L topology.kubernetes.io/region

  # Names only, for a script
  clusterregistry get -n fleet -o name --no-headers

  # Columns of your choosing, newest first
  clusterregistry get -n fleet --sort-by .metadata.creationTimestamp \
    -o custom-columns=NAME:.metadata.name,VERSION:.status.version,SERVER:.spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress

  # One member as YAML
  clusterregistry get prod-eu-1 -n fleet -o yaml`
)

// GetOptions are get's flags and what Complete makes of them, in the manner of kubectl's get.
type GetOptions struct {
	PrintFlags    *genericclioptions.PrintFlags
	AllNamespaces bool
	Selector      string
	Names         []string
	Watch         bool
	WatchOnly     bool
	NoHeaders     bool
	ShowLabels    bool
	LabelColumns  []string
	SortBy        string

	namespace string
	selector  labels.Selector
	wide      bool
	columns   []customColumn           // -o custom-columns; nil otherwise
	printer   printers.ResourcePrinter // nil for a table (the overview, or custom columns)
	sortBy    *jsonpath.JSONPath
	registry  versioned.Interface
	expiries  *tokenExpiries // credential expiry, from join's Secrets
	reg       *registry      // for ClusterSetExists
	out       io.Writer
}

func newGet(f *factory) *cobra.Command {
	o := &GetOptions{PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme)}
	cmd := &cobra.Command{
		Use:     "get [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR] [-w] [-o wide|yaml|json|name|jsonpath=...|custom-columns=...]",
		Aliases: []string{"list"},
		Short:   "Show the fleet's members: Ready, reason, version, last report, credential expiry",
		Long:    getLong,
		Example: getExample,
		Args:    cobra.ArbitraryArgs,
		RunE:    runOptions(f, o),
	}
	cmd.AddCommand(newGetPlacements(f))
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "wide, custom-columns=HEADER:JSONPATH,..., or as kubectl get: " + strings.Join(o.PrintFlags.AllowedFormats(), ", ")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return append([]string{"wide", "custom-columns="}, o.PrintFlags.AllowedFormats()...), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace (cluster set)")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "after listing, print each change as it happens, until interrupted")
	cmd.Flags().BoolVar(&o.WatchOnly, "watch-only", false, "print each change as it happens, without listing first")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "leave out the header row (tables and custom columns)")
	cmd.Flags().BoolVar(&o.ShowLabels, "show-labels", false, "add a column of each Cluster's labels")
	cmd.Flags().StringSliceVarP(&o.LabelColumns, "label-columns", "L", nil, "add a column per label key, e.g. -L env,topology.kubernetes.io/region")
	cmd.Flags().StringVar(&o.SortBy, "sort-by", "", "sort by a JSONPath of the Cluster, e.g. .metadata.name or '{.status.version}'")
	return cmd
}

// Complete fills in what the flags and arguments leave to the environment.
func (o *GetOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.Names, o.out = args, cmd.OutOrStdout()
	var err error
	if o.selector, err = labels.Parse(o.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	switch format := *o.PrintFlags.OutputFormat; {
	case format == "":
	case format == "wide":
		o.wide = true
	case strings.HasPrefix(format, "custom-columns="):
		if o.columns, err = parseCustomColumns(strings.TrimPrefix(format, "custom-columns=")); err != nil {
			return usageError{fmt.Errorf("-o %s: %w", format, err)}
		}
	default:
		if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
			return usageError{fmt.Errorf("-o %s: want wide, custom-columns=..., or one of %s", format, strings.Join(o.PrintFlags.AllowedFormats(), ", "))}
		}
	}
	if o.SortBy != "" {
		if o.sortBy, err = parseJSONPath("sort-by", o.SortBy); err != nil {
			return usageError{fmt.Errorf("--sort-by %s: %w", o.SortBy, err)}
		}
	}
	if len(o.Names) > 0 && o.AllNamespaces {
		return usageError{errors.New("names and -A conflict: a name is looked up in one namespace, -n's")}
	}
	reg, err := f.Registry()
	if err != nil {
		return err
	}
	o.namespace, o.registry, o.expiries, o.reg = reg.Namespace, reg.Clusters, newTokenExpiries(reg.Kube), reg
	if o.AllNamespaces {
		o.namespace = metav1.NamespaceAll
	}
	return nil
}

// Validate checks what Complete could not.
func (o *GetOptions) Validate() error {
	switch {
	case len(o.Names) > 0 && !o.selector.Empty():
		return usageError{errors.New("names and -l conflict: give one or the other")}
	case (o.Watch || o.WatchOnly) && len(o.Names) > 1:
		return usageError{fmt.Errorf("-w follows one Cluster or a selection, not %d names: give one name, or -l", len(o.Names))}
	case o.printer != nil && (o.NoHeaders || o.ShowLabels || len(o.LabelColumns) > 0):
		// As kubectl: these shape tables; -o yaml and the like print whole objects.
		if *o.PrintFlags.OutputFormat != "name" || o.ShowLabels || len(o.LabelColumns) > 0 {
			return usageError{fmt.Errorf("--no-headers, --show-labels and -L shape tables; -o %s prints objects", *o.PrintFlags.OutputFormat)}
		}
	}
	return nil
}

// Run lists the Clusters and prints them, then with -w each change.
func (o *GetOptions) Run(ctx context.Context) error {
	clusters := o.registry.ClusterregistryV1alpha1().Clusters(o.namespace)
	list := &v1alpha1.ClusterList{}
	if len(o.Names) == 0 {
		var err error
		if list, err = clusters.List(ctx, metav1.ListOptions{LabelSelector: o.selector.String()}); err != nil {
			return fmt.Errorf("listing the Clusters of %s: %w", describeNamespace(o.namespace), err)
		}
		if len(list.Items) == 0 && o.namespace != metav1.NamespaceAll {
			// A mistyped -n finds nothing too: say that the set does not exist (exit 1), as
			// health and rotate do, rather than "No Clusters found" (exit 0).
			if err := o.reg.ClusterSetExists(ctx, o.namespace); err != nil {
				return err
			}
		}
	}
	var missing []string
	for _, name := range o.Names {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && !o.Watch && !o.WatchOnly {
			missing = append(missing, name)
			continue
		}
		if apierrors.IsNotFound(err) {
			continue // -w NAME waits for it, as kubectl get -w does
		}
		if err != nil {
			return err
		}
		list.Items = append(list.Items, *c)
		list.ResourceVersion = c.ResourceVersion
	}
	table := o.tablePrinter()
	if !o.WatchOnly {
		if err := o.print(ctx, table, list.Items, len(o.Names) == 1); err != nil {
			return err
		}
		if o.printer == nil && len(list.Items) == 0 && len(missing) == 0 && !o.Watch {
			fmt.Fprintf(o.out, "No Clusters found in %s.\n", describeNamespace(o.namespace))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no Cluster %s in namespace %s", strings.Join(missing, ", "), o.namespace)
	}
	if o.Watch || o.WatchOnly {
		return o.watch(ctx, table, list.ResourceVersion)
	}
	return nil
}

// tablePrinter is cli-runtime's table printer with get's table flags; nil for -o yaml and the
// other object printers. One printer serves a whole run, so that -w prints the header once.
func (o *GetOptions) tablePrinter() printers.ResourcePrinter {
	if o.printer != nil {
		return nil
	}
	return printers.NewTablePrinter(printers.PrintOptions{
		NoHeaders:     o.NoHeaders,
		Wide:          o.wide,
		WithNamespace: o.namespace == metav1.NamespaceAll,
		ShowLabels:    o.ShowLabels,
		ColumnLabels:  o.LabelColumns,
	})
}

// print writes clusters: as a table (the overview or custom columns), or with -o's printer.
func (o *GetOptions) print(ctx context.Context, table printers.ResourcePrinter, clusters []v1alpha1.Cluster, single bool) error {
	if o.sortBy != nil {
		if err := sortByJSONPath(clusters, o.sortBy); err != nil {
			return fmt.Errorf("--sort-by %s: %w", o.SortBy, err)
		}
	} else {
		notReadyFirst(clusters)
	}
	if o.printer != nil {
		if len(clusters) == 0 {
			return nil
		}
		return printClusters(o.out, o.printer, *o.PrintFlags.OutputFormat, clusters, single)
	}
	if len(clusters) == 0 {
		return nil
	}
	var t *metav1.Table
	if o.columns != nil {
		t = customColumnsTable(o.columns, clusters)
	} else {
		t = o.overview(ctx, clusters)
	}
	return table.PrintObj(t, o.out)
}

// watch prints each change of the selected Clusters from resourceVersion on, until ctx ends; a
// watch the registry closes is taken up again where it ended.
func (o *GetOptions) watch(ctx context.Context, table printers.ResourcePrinter, resourceVersion string) error {
	clusters := o.registry.ClusterregistryV1alpha1().Clusters(o.namespace)
	options := func(opts metav1.ListOptions) metav1.ListOptions {
		opts.LabelSelector = o.selector.String()
		if len(o.Names) == 1 {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.Names[0]).String()
		}
		return opts
	}
	if resourceVersion == "" {
		list, err := clusters.List(ctx, options(metav1.ListOptions{}))
		if err != nil {
			return fmt.Errorf("listing the Clusters of %s: %w", describeNamespace(o.namespace), err)
		}
		resourceVersion = list.ResourceVersion
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return clusters.Watch(ctx, options(opts))
		},
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil // interrupted: done, as kubectl get -w
		case <-w.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Error:
				return fmt.Errorf("watching the Clusters of %s: %w", describeNamespace(o.namespace), apierrors.FromObject(ev.Object))
			case watch.Added, watch.Modified, watch.Deleted:
				c, ok := ev.Object.(*v1alpha1.Cluster)
				if !ok {
					continue
				}
				if err := o.print(ctx, table, []v1alpha1.Cluster{*c}, true); err != nil {
					return err
				}
			}
		}
	}
}

func describeNamespace(namespace string) string {
	if namespace == metav1.NamespaceAll {
		return "any namespace"
	}
	return "namespace " + namespace
}

// overviewColumns are the overview's: kubectl's printers add NAMESPACE with -A, LABELS with
// --show-labels and one per -L key, and show the priority-1 columns only with -o wide.
var overviewColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name"},
	{Name: "Ready", Type: "string"},
	{Name: "Reason", Type: "string"},
	{Name: "Version", Type: "string"},
	{Name: "Last Report", Type: "string"},
	{Name: "Credential", Type: "string"},
	{Name: "Expires", Type: "string"},
	{Name: "Server", Type: "string", Priority: 1},
	{Name: "Message", Type: "string", Priority: 1},
}

// overview is the table of clusters, in their order: a row each, with the Cluster as the row's
// object, from which the printer reads its namespace and labels.
func (o *GetOptions) overview(ctx context.Context, clusters []v1alpha1.Cluster) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: overviewColumns}
	now := time.Now()
	for i := range clusters {
		c := &clusters[i]
		ready, reason, message := "Unknown", "", ""
		if cond := c.Status.Condition(v1alpha1.ConditionReady); cond != nil {
			ready, reason, message = string(cond.Status), cond.Reason, cond.Message
		}
		report := "never"
		if t := c.Status.LastProbeTime; t != nil {
			report = duration.HumanDuration(now.Sub(t.Time)) + " ago"
		}
		credential, expires := o.expiries.credential(ctx, c, now)
		server := ""
		if eps := c.Spec.KubernetesAPIEndpoints.ServerEndpoints; len(eps) > 0 {
			server = eps[0].ServerAddress
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{c.Name, ready, orDash(reason), orDash(c.Status.Version), report, credential, expires,
				orDash(server), orDash(strings.ReplaceAll(message, "\n", " "))},
			Object: runtime.RawExtension{Object: c},
		})
	}
	return t
}

// notReadyFirst sorts members that are not Ready before those that are, each by namespace and name.
func notReadyFirst(clusters []v1alpha1.Cluster) {
	rank := func(c *v1alpha1.Cluster) int {
		if cond := c.Status.Condition(v1alpha1.ConditionReady); cond != nil && cond.Status == metav1.ConditionTrue {
			return 1
		}
		return 0
	}
	slices.SortStableFunc(clusters, func(a, b v1alpha1.Cluster) int {
		if d := rank(&a) - rank(&b); d != 0 {
			return d
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
