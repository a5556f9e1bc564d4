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
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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
	kubectlget "k8s.io/kubectl/pkg/cmd/get"

	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

var (
	getLong = `get shows the fleet: each Cluster it selects with its Ready state and reason, the member's
version, when the health controller last reported on it, the credential it is reached with
and, where the registry holds it, when that credential expires (the token join stored; never the
token itself). Members not Ready come first, unless --sort-by says otherwise.

As kubectl get: -w follows changes (a row per change, until interrupted; --watch-only skips the
list first), --no-headers, --show-labels, -L adds a column per label key, --sort-by sorts by a
JSONPath of the Cluster, and -o wide, yaml, json, name, jsonpath=..., go-template=...,
custom-columns=HEADER:JSONPATH,... and custom-columns-file=FILE: the flags and printers are
kubectl get's own (k8s.io/kubectl/pkg/cmd/get).

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
// for one kind of the registry: get (Clusters), get placements and get releases are this command
// over three kinds, with the same flags. The printing flags are kubectl get's own
// (k8s.io/kubectl/pkg/cmd/get): -o with custom-columns, --sort-by, --no-headers, --show-labels, -L.
type GetOptions[T any, P object[T]] struct {
	PrintFlags    *kubectlget.PrintFlags
	AllNamespaces bool
	Selector      string
	Names         []string
	Watch         bool
	WatchOnly     bool

	// kindOf makes the kind from the registry, in Complete.
	kindOf    func(*registry) getKind[T, P]
	kind      getKind[T, P]
	namespace string
	selector  labels.Selector
	// table says whether -o asked for the overview (none, or wide); wide for its priority-1 columns.
	table, wide bool
	// tabular says whether the output is columns that -w lines up: the overview or custom columns.
	tabular bool
	// printer prints a whole run: the table printer, or -o's. One printer serves a run, so that
	// -w prints the header once.
	printer printers.ResourcePrinter
	sortBy  string // --sort-by as kubectl reads it ("{.status.version}")
	reg     *registry
	out     io.Writer
}

func newGetOptions[T any, P object[T]](kindOf func(*registry) getKind[T, P], kind, plural string) *GetOptions[T, P] {
	flags := kubectlget.NewGetPrintFlags()
	flags.HumanReadableFlags.ShowKind = nil // one kind at a time
	return &GetOptions[T, P]{PrintFlags: flags, kindOf: kindOf, kind: getKind[T, P]{kind: kind, plural: plural}}
}

// addFlags adds get's flags, those of kubectl get, to cmd.
func (o *GetOptions[T, P]) addFlags(cmd *cobra.Command) {
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace (cluster set)")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector over the "+o.kind.plural+", e.g. env=prod")
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", false, "after listing, print each change as it happens, until interrupted")
	cmd.Flags().BoolVar(&o.WatchOnly, "watch-only", false, "print each change as it happens, without listing first")
}

func newGet(f *factory) *cobra.Command {
	o := newGetOptions(clusterKind, "Cluster", "Clusters")
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
	expiries := newTokenExpiries(reg.Kube)
	k := registryKind[v1alpha1.Cluster, *v1alpha1.Cluster, *v1alpha1.ClusterList]("Cluster", "Clusters",
		reg.Clusters.ClusterregistryV1alpha1().Clusters, func(l *v1alpha1.ClusterList) []v1alpha1.Cluster { return l.Items })
	k.table = func(ctx context.Context, items []v1alpha1.Cluster, _ bool) *metav1.Table {
		return overview(ctx, expiries, items)
	}
	k.order = notReadyFirst
	return k
}

// Complete fills in what the flags and arguments leave to the environment.
func (o *GetOptions[T, P]) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.Names, o.out = args, cmd.OutOrStdout()
	var err error
	if o.selector, err = labels.Parse(o.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	if err := o.completePrinter(); err != nil {
		return err
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

// completePrinter makes -o's printer from kubectl get's PrintFlags, and reads --sort-by as
// kubectl does (braces and the leading dot optional).
func (o *GetOptions[T, P]) completePrinter() error {
	format := *o.PrintFlags.OutputFormat
	o.table, o.wide = format == "" || format == "wide", format == "wide"
	o.tabular = o.table || strings.HasPrefix(format, "custom-columns")
	if o.AllNamespaces {
		_ = o.PrintFlags.EnsureWithNamespace() // the NAMESPACE column
	}
	var err error
	if o.printer, err = o.PrintFlags.ToPrinter(); err != nil {
		if genericclioptions.IsNoCompatiblePrinterError(err) {
			return usageError{fmt.Errorf("-o %s: want one of %s", format, strings.Join(o.PrintFlags.AllowedFormats(), ", "))}
		}
		return usageError{fmt.Errorf("-o %s: %w", format, err)}
	}
	if sortBy := *o.PrintFlags.HumanReadableFlags.SortBy; sortBy != "" {
		if o.sortBy, err = kubectlget.RelaxedJSONPathExpression(sortBy); err == nil {
			err = jsonpath.New("sort-by").Parse(o.sortBy)
		}
		if err != nil {
			return usageError{fmt.Errorf("--sort-by %s: %w", sortBy, err)}
		}
	}
	return nil
}

// Validate checks what Complete could not.
func (o *GetOptions[T, P]) Validate() error {
	human := o.PrintFlags.HumanReadableFlags
	labelColumns := *human.ShowLabels || len(*human.ColumnLabels) > 0
	switch format := *o.PrintFlags.OutputFormat; {
	case len(o.Names) > 0 && !o.selector.Empty():
		return usageError{errors.New("names and -l conflict: give one or the other")}
	case (o.Watch || o.WatchOnly) && len(o.Names) > 1:
		return usageError{fmt.Errorf("-w follows one %s or a selection, not %d names: give one name, or -l", o.kind.kind, len(o.Names))}
	case !o.table && labelColumns, !o.tabular && format != "name" && *o.PrintFlags.NoHeaders:
		// As kubectl: these shape tables; -o yaml and the like print whole objects.
		return usageError{fmt.Errorf("--no-headers, --show-labels and -L shape tables; -o %s prints objects", format)}
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
	if (o.Watch || o.WatchOnly) && o.tabular {
		// Rows printed one change at a time keep the columns of the first table.
		out = &alignedRows{out: o.out}
	}
	if !o.WatchOnly {
		if err := o.print(ctx, out, items, len(o.Names) == 1); err != nil {
			return err
		}
		if o.tabular && len(items) == 0 && len(missing) == 0 && !o.Watch {
			fmt.Fprintf(o.out, "No %s found in %s.\n", o.kind.plural, describeNamespace(o.namespace))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no %s %s in namespace %s", o.kind.kind, strings.Join(missing, ", "), o.namespace)
	}
	if o.Watch || o.WatchOnly {
		return o.watch(ctx, out, resourceVersion)
	}
	return nil
}

// print writes items to out with the run's printer: the kind's overview as a table, or the
// objects as -o asks.
func (o *GetOptions[T, P]) print(ctx context.Context, out io.Writer, items []T, single bool) error {
	if err := o.sort(items); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	if o.table {
		return o.printer.PrintObj(o.kind.table(ctx, items, o.wide), out)
	}
	return printItems[T, P](out, o.printer, *o.PrintFlags.OutputFormat, o.kind.kind, items, single)
}

// sort puts items in the overview's order, then in --sort-by's as kubectl get sorts (numbers
// and quantities by value, times by time, objects without the field first).
func (o *GetOptions[T, P]) sort(items []T) error {
	o.kind.order(items)
	if o.sortBy == "" || len(items) < 2 {
		return nil
	}
	objs, err := asUnstructured[T, P](o.kind.kind, items)
	if err != nil {
		return err
	}
	sorter, err := kubectlget.SortObjects(unstructured.UnstructuredJSONScheme, objs, o.sortBy)
	if err != nil {
		return fmt.Errorf("--sort-by %s: %w", *o.PrintFlags.HumanReadableFlags.SortBy, err)
	}
	sorted := make([]T, len(items))
	for i := range sorted {
		sorted[i] = items[sorter.OriginalPosition(i)]
	}
	copy(items, sorted)
	return nil
}

// watch prints each change of the selected objects from resourceVersion on, until ctx ends; a
// watch the registry closes is taken up again where it ended.
func (o *GetOptions[T, P]) watch(ctx context.Context, out io.Writer, resourceVersion string) error {
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
				if err := o.print(ctx, out, []T{*obj}, true); err != nil {
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
	{Name: "Nodes", Type: "string", Priority: 1},
	{Name: "CPU", Type: "string", Priority: 1},
	{Name: "Memory", Type: "string", Priority: 1},
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
		nodes, cpu, memory := held(c.Status.Resources)
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{c.Name, ready, orDash(reason), orDash(c.Status.Version), report, credential, expires,
				reached(c), nodes, cpu, memory, orDash(server), orDash(strings.ReplaceAll(message, "\n", " "))},
			Object: runtime.RawExtension{Object: c},
		})
	}
	return t
}

// held is what the member's status.resources say, as -o wide shows it: Nodes ready of all, and
// cpu and memory requested of what the ready Nodes offer; dashes before a capacity controller
// wrote them.
func held(r *v1alpha1.ClusterResources) (nodes, cpu, memory string) {
	if r == nil {
		return "-", "-", "-"
	}
	return fmt.Sprintf("%d/%d", r.ReadyNodes, r.Nodes), capacity.Share(r, corev1.ResourceCPU), capacity.Share(r, corev1.ResourceMemory)
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
