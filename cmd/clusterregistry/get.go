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

// GetOptions are get's flags and what Complete makes of them, in the manner of kubectl's get,
// for one kind of the registry: get (Clusters) and get placements are this command over two
// kinds, with the same flags.
type GetOptions[T any, P object[T]] struct {
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

	// kindOf makes the kind from the registry, in Complete.
	kindOf    func(*registry) getKind[T, P]
	kind      getKind[T, P]
	namespace string
	selector  labels.Selector
	wide      bool
	columns   []customColumn           // -o custom-columns; nil otherwise
	printer   printers.ResourcePrinter // nil for a table (the overview, or custom columns)
	sortBy    *jsonpath.JSONPath
	reg       *registry
	out       io.Writer
}

// addGetFlags adds get's flags, those of kubectl get, to cmd.
func (o *GetOptions[T, P]) addFlags(cmd *cobra.Command) {
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "wide, custom-columns=HEADER:JSONPATH,..., or as kubectl get: " + strings.Join(o.PrintFlags.AllowedFormats(), ", ")
	_ = cmd.RegisterFlagCompletionFunc("output", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return append([]string{"wide", "custom-columns="}, o.PrintFlags.AllowedFormats()...), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	})
	plural := strings.ToLower(o.kind.plural)
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace (cluster set)")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector over the "+o.kind.plural+", e.g. env=prod")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "after listing, print each change as it happens, until interrupted")
	cmd.Flags().BoolVar(&o.WatchOnly, "watch-only", false, "print each change as it happens, without listing first")
	cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "leave out the header row (tables and custom columns)")
	cmd.Flags().BoolVar(&o.ShowLabels, "show-labels", false, "add a column of each "+strings.ToLower(o.kind.kind)+"'s labels")
	cmd.Flags().StringSliceVarP(&o.LabelColumns, "label-columns", "L", nil, "add a column per label key, e.g. -L env,topology.kubernetes.io/region")
	cmd.Flags().StringVar(&o.SortBy, "sort-by", "", "sort the "+plural+" by a JSONPath, e.g. .metadata.name or '{.metadata.creationTimestamp}'")
}

func newGet(f *factory) *cobra.Command {
	o := &GetOptions[v1alpha1.Cluster, *v1alpha1.Cluster]{PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme),
		kindOf: clusterKind, kind: getKind[v1alpha1.Cluster, *v1alpha1.Cluster]{kind: "Cluster", plural: "Clusters"}}
	cmd := &cobra.Command{
		Use:     "get [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR] [-w] [-o wide|yaml|json|name|jsonpath=...|custom-columns=...]",
		Aliases: []string{"list"},
		Short:   "Show the fleet's members: Ready, reason, version, last report, credential expiry",
		Long:    getLong,
		Example: getExample,
		Args:    cobra.ArbitraryArgs,
		RunE:    runOptions(f, o),
	}
	cmd.AddCommand(newGetPlacements(f), newGetReleases(f))
	o.addFlags(cmd)
	return cmd
}

// clusterKind is get's kind: the registry's Clusters, members that need attention first.
func clusterKind(reg *registry) getKind[v1alpha1.Cluster, *v1alpha1.Cluster] {
	clusters := reg.Clusters.ClusterregistryV1alpha1()
	expiries := newTokenExpiries(reg.Kube)
	return getKind[v1alpha1.Cluster, *v1alpha1.Cluster]{
		kind: "Cluster", plural: "Clusters",
		list: func(ctx context.Context, ns string, opts metav1.ListOptions) ([]v1alpha1.Cluster, string, error) {
			list, err := clusters.Clusters(ns).List(ctx, opts)
			if err != nil {
				return nil, "", err
			}
			return list.Items, list.ResourceVersion, nil
		},
		get: func(ctx context.Context, ns, name string) (*v1alpha1.Cluster, error) {
			return clusters.Clusters(ns).Get(ctx, name, metav1.GetOptions{})
		},
		watch: func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error) {
			return clusters.Clusters(ns).Watch(ctx, opts)
		},
		table: func(ctx context.Context, items []v1alpha1.Cluster, _ bool) *metav1.Table {
			return overview(ctx, expiries, items)
		},
		order: notReadyFirst,
	}
}

// Complete fills in what the flags and arguments leave to the environment.
func (o *GetOptions[T, P]) Complete(f *factory, cmd *cobra.Command, args []string) error {
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
	if o.reg, err = f.Registry(); err != nil {
		return err
	}
	o.kind, o.namespace = o.kindOf(o.reg), o.reg.Namespace
	if o.AllNamespaces {
		o.namespace = metav1.NamespaceAll
	}
	return nil
}

// Validate checks what Complete could not.
func (o *GetOptions[T, P]) Validate() error {
	switch {
	case len(o.Names) > 0 && !o.selector.Empty():
		return usageError{errors.New("names and -l conflict: give one or the other")}
	case (o.Watch || o.WatchOnly) && len(o.Names) > 1:
		return usageError{fmt.Errorf("-w follows one %s or a selection, not %d names: give one name, or -l", o.kind.kind, len(o.Names))}
	case o.printer != nil && (o.NoHeaders || o.ShowLabels || len(o.LabelColumns) > 0):
		// As kubectl: these shape tables; -o yaml and the like print whole objects.
		if *o.PrintFlags.OutputFormat != "name" || o.ShowLabels || len(o.LabelColumns) > 0 {
			return usageError{fmt.Errorf("--no-headers, --show-labels and -L shape tables; -o %s prints objects", *o.PrintFlags.OutputFormat)}
		}
	}
	return nil
}

// Run lists the objects and prints them, then with -w each change.
func (o *GetOptions[T, P]) Run(ctx context.Context) error {
	var items []T
	var resourceVersion string
	if len(o.Names) == 0 {
		var err error
		if items, resourceVersion, err = o.kind.list(ctx, o.namespace, metav1.ListOptions{LabelSelector: o.selector.String()}); err != nil {
			return fmt.Errorf("listing the %s of %s: %w", o.kind.plural, describeNamespace(o.namespace), err)
		}
		if len(items) == 0 && o.namespace != metav1.NamespaceAll {
			// A mistyped -n finds nothing too: say that the set does not exist (exit 1), as
			// health and rotate do, rather than "No ... found" (exit 0).
			if err := o.reg.ClusterSetExists(ctx, o.namespace); err != nil {
				return err
			}
		}
	}
	var missing []string
	for _, name := range o.Names {
		obj, err := o.kind.get(ctx, o.namespace, name)
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
		items = append(items, *obj)
		resourceVersion = P(obj).GetResourceVersion()
	}
	out := o.out
	if (o.Watch || o.WatchOnly) && o.printer == nil {
		// Rows printed one change at a time keep the columns of the first table.
		out = &alignedRows{out: o.out}
	}
	table := o.tablePrinter()
	if !o.WatchOnly {
		if err := o.print(ctx, out, table, items, len(o.Names) == 1); err != nil {
			return err
		}
		if o.printer == nil && len(items) == 0 && len(missing) == 0 && !o.Watch {
			fmt.Fprintf(o.out, "No %s found in %s.\n", o.kind.plural, describeNamespace(o.namespace))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no %s %s in namespace %s", o.kind.kind, strings.Join(missing, ", "), o.namespace)
	}
	if o.Watch || o.WatchOnly {
		return o.watch(ctx, out, table, resourceVersion)
	}
	return nil
}

// tablePrinter is cli-runtime's table printer with get's table flags; nil for -o yaml and the
// other object printers. One printer serves a whole run, so that -w prints the header once.
func (o *GetOptions[T, P]) tablePrinter() printers.ResourcePrinter {
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

// print writes items to out: as a table (the overview or custom columns), or with -o's printer.
func (o *GetOptions[T, P]) print(ctx context.Context, out io.Writer, table printers.ResourcePrinter, items []T, single bool) error {
	if o.sortBy != nil {
		if err := sortByJSONPath[T, P](o.kind.kind, items, o.sortBy); err != nil {
			return fmt.Errorf("--sort-by %s: %w", o.SortBy, err)
		}
	} else {
		o.kind.order(items)
	}
	if len(items) == 0 {
		return nil
	}
	if o.printer != nil {
		return printItems[T, P](out, o.printer, *o.PrintFlags.OutputFormat, o.kind.kind, items, single)
	}
	var t *metav1.Table
	if o.columns != nil {
		t = customColumnsTable[T, P](o.kind.kind, o.columns, items)
	} else {
		t = o.kind.table(ctx, items, o.wide)
	}
	return table.PrintObj(t, out)
}

// watch prints each change of the selected objects from resourceVersion on, until ctx ends; a
// watch the registry closes is taken up again where it ended.
func (o *GetOptions[T, P]) watch(ctx context.Context, out io.Writer, table printers.ResourcePrinter, resourceVersion string) error {
	options := func(opts metav1.ListOptions) metav1.ListOptions {
		opts.LabelSelector = o.selector.String()
		if len(o.Names) == 1 {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", o.Names[0]).String()
		}
		return opts
	}
	if resourceVersion == "" {
		_, rv, err := o.kind.list(ctx, o.namespace, options(metav1.ListOptions{}))
		if err != nil {
			return fmt.Errorf("listing the %s of %s: %w", o.kind.plural, describeNamespace(o.namespace), err)
		}
		resourceVersion = rv
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, resourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return o.kind.watch(ctx, o.namespace, options(opts))
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
				return fmt.Errorf("watching the %s of %s: %w", o.kind.plural, describeNamespace(o.namespace), apierrors.FromObject(ev.Object))
			case watch.Added, watch.Modified, watch.Deleted:
				obj, ok := ev.Object.(P)
				if !ok {
					continue
				}
				if err := o.print(ctx, out, table, []T{*obj}, true); err != nil {
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
	{Name: "Reached", Type: "string", Priority: 1},
	{Name: "Server", Type: "string", Priority: 1},
	{Name: "Message", Type: "string", Priority: 1},
}

// overview is the table of clusters, in their order: a row each, with the Cluster as the row's
// object, from which the printer reads its namespace and labels.
func overview(ctx context.Context, expiries *tokenExpiries, clusters []v1alpha1.Cluster) *metav1.Table {
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
		credential, expires := expiries.credential(ctx, c, now)
		server := ""
		if eps := c.Spec.KubernetesAPIEndpoints.ServerEndpoints; len(eps) > 0 {
			server = eps[0].ServerAddress
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{c.Name, ready, orDash(reason), orDash(c.Status.Version), report, credential, expires,
				reached(c), orDash(server), orDash(strings.ReplaceAll(message, "\n", " "))},
			Object: runtime.RawExtension{Object: c},
		})
	}
	return t
}

// reached is how readers reach the member: directly, or through the tunnel of the agent named.
func reached(c *v1alpha1.Cluster) string {
	if t := c.Spec.KubernetesAPIEndpoints.Tunnel; t != nil {
		return "tunnel:" + t.Agent
	}
	return "direct"
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
