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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clientset/versioned/scheme"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

var (
	getLong = `get shows the fleet: each Cluster it selects with its Ready state and reason, the member's
version, when the health controller last reported on it, the credential it is reached with
and, where the registry holds it, when that credential expires (the token join stored; never the
token itself). Members not Ready come first. -o yaml, json, name, jsonpath=... and
go-template=... print the Clusters themselves, as kubectl get does.`

	getExample = `  # The fleet cluster set
  clusterregistry get -n fleet

  # Every cluster set's production members, with endpoints and messages
  clusterregistry get -A -l env=prod -o wide

  # Names only, for a script
  clusterregistry get -n fleet -o name

  # One member as YAML
  clusterregistry get prod-eu-1 -n fleet -o yaml`
)

// GetOptions are get's flags and what Complete makes of them, in the manner of kubectl's get.
type GetOptions struct {
	PrintFlags    *genericclioptions.PrintFlags
	AllNamespaces bool
	Selector      string
	Names         []string

	namespace string
	selector  labels.Selector
	wide      bool
	printer   printers.ResourcePrinter // nil for the overview table
	registry  versioned.Interface
	kube      kubernetes.Interface // to read credential expiry from join's Secrets
	out       io.Writer
	// expiries are the token expiries of each namespace's Secrets, read with one list per
	// namespace rather than one request per Cluster; nil for a namespace whose list failed.
	expiries map[string]map[string]time.Time
}

func newGet(f *factory) *cobra.Command {
	o := &GetOptions{PrintFlags: genericclioptions.NewPrintFlags("").WithTypeSetter(scheme.Scheme)}
	cmd := &cobra.Command{
		Use:     "get [NAME ...] [-n NAMESPACE | -A] [-l SELECTOR] [-o wide|yaml|json|name|jsonpath=...]",
		Aliases: []string{"list"},
		Short:   "Show the fleet's members: Ready, reason, version, last report, credential expiry",
		Long:    getLong,
		Example: getExample,
		Args:    cobra.ArbitraryArgs,
		RunE:    runOptions(f, o),
	}
	o.PrintFlags.AddFlags(cmd)
	cmd.Flags().Lookup("output").Usage = "wide, or as kubectl get: " + strings.Join(o.PrintFlags.AllowedFormats(), ", ")
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "every namespace (cluster set)")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	return cmd
}

// Complete fills in what the flags and arguments leave to the environment.
func (o *GetOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
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
	if len(o.Names) > 0 && o.AllNamespaces {
		return usageError{errors.New("names and -A conflict: a name is looked up in one namespace, -n's")}
	}
	reg, err := f.Registry()
	if err != nil {
		return err
	}
	o.namespace, o.registry, o.kube = reg.Namespace, reg.Clusters, reg.Kube
	if o.AllNamespaces {
		o.namespace = metav1.NamespaceAll
	}
	return nil
}

// Validate checks what Complete could not.
func (o *GetOptions) Validate() error {
	if len(o.Names) > 0 && !o.selector.Empty() {
		return usageError{errors.New("names and -l conflict: give one or the other")}
	}
	return nil
}

// Run lists the Clusters and prints them.
func (o *GetOptions) Run(ctx context.Context) error {
	clusters := o.registry.ClusterregistryV1alpha1().Clusters(o.namespace)
	list := &v1alpha1.ClusterList{}
	if len(o.Names) == 0 {
		var err error
		if list, err = clusters.List(ctx, metav1.ListOptions{LabelSelector: o.selector.String()}); err != nil {
			return fmt.Errorf("listing the Clusters of %s: %w", describeNamespace(o.namespace), err)
		}
	}
	var missing []string
	for _, name := range o.Names {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			missing = append(missing, name)
			continue
		}
		if err != nil {
			return err
		}
		list.Items = append(list.Items, *c)
	}
	if o.printer != nil {
		if err := printClusters(o.out, o.printer, *o.PrintFlags.OutputFormat, list.Items, len(o.Names) == 1); err != nil {
			return err
		}
	} else if len(list.Items) == 0 && len(missing) == 0 {
		fmt.Fprintf(o.out, "No Clusters found in %s.\n", describeNamespace(o.namespace))
	} else if len(list.Items) > 0 {
		if err := o.printTable(ctx, list.Items); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no Cluster %s in namespace %s", strings.Join(missing, ", "), o.namespace)
	}
	return nil
}

func describeNamespace(namespace string) string {
	if namespace == metav1.NamespaceAll {
		return "any namespace"
	}
	return "namespace " + namespace
}

// printTable writes the overview: members not Ready first, then by namespace and name.
func (o *GetOptions) printTable(ctx context.Context, clusters []v1alpha1.Cluster) error {
	w := printers.GetNewTabWriter(o.out)
	header := []string{"NAME", "READY", "REASON", "VERSION", "LAST REPORT", "CREDENTIAL", "EXPIRES"}
	if o.namespace == metav1.NamespaceAll {
		header = append([]string{"NAMESPACE"}, header...)
	}
	if o.wide {
		header = append(header, "SERVER", "MESSAGE")
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	notReadyFirst(clusters)
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
		credential, expires := o.credential(ctx, c, now)
		row := []string{c.Name, ready, orDash(reason), orDash(c.Status.Version), report, credential, expires}
		if o.namespace == metav1.NamespaceAll {
			row = append([]string{c.Namespace}, row...)
		}
		if o.wide {
			server := ""
			if eps := c.Spec.KubernetesAPIEndpoints.ServerEndpoints; len(eps) > 0 {
				server = eps[0].ServerAddress
			}
			row = append(row, orDash(server), orDash(strings.ReplaceAll(message, "\n", " ")))
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	return w.Flush()
}

// notReadyFirst sorts members that are not Ready before those that are, each by namespace and name.
func notReadyFirst(clusters []v1alpha1.Cluster) {
	rank := func(c *v1alpha1.Cluster) int {
		if cond := c.Status.Condition(v1alpha1.ConditionReady); cond != nil && cond.Status == metav1.ConditionTrue {
			return 1
		}
		return 0
	}
	slices.SortFunc(clusters, func(a, b v1alpha1.Cluster) int {
		if d := rank(&a) - rank(&b); d != 0 {
			return d
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
}

// credential names the provider a reader would try first and, for a secret provider whose
// Secret holds a service-account token (as join stores it), when that token expires. The token
// is read only to decode its expiry claim; it is never printed. Where the caller may not read the
// Secret, or the credential carries no expiry, the expiry is "-".
func (o *GetOptions) credential(ctx context.Context, c *v1alpha1.Cluster, now time.Time) (string, string) {
	if len(c.Spec.AuthInfo.Providers) == 0 {
		return "none", "-"
	}
	p := c.Spec.AuthInfo.Providers[0]
	name := p.Type.Name
	if p.Type.Name != v1alpha1.ProviderTypeSecret || p.Config["name"] == "" {
		return name, "-"
	}
	namespace := p.Config["namespace"]
	if namespace == "" {
		namespace = c.Namespace
	}
	exp, ok := o.tokenExpiry(ctx, namespace, p.Config["name"])
	if !ok {
		return name, "-"
	}
	if exp.Before(now) {
		return name, "expired " + duration.HumanDuration(now.Sub(exp)) + " ago"
	}
	return name, "in " + duration.HumanDuration(exp.Sub(now))
}

// tokenExpiry is when the token in Secret namespace/name expires, if it holds a token with an
// expiry and the caller may read it.
func (o *GetOptions) tokenExpiry(ctx context.Context, namespace, name string) (time.Time, bool) {
	if o.expiries == nil {
		o.expiries = map[string]map[string]time.Time{}
	}
	byName, listed := o.expiries[namespace]
	if !listed {
		if list, err := o.kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); err == nil {
			byName = map[string]time.Time{}
			for _, s := range list.Items {
				if exp := tokenExpiry(string(s.Data[v1alpha1.SecretTokenKey])); !exp.IsZero() { // only its exp claim is read
					byName[s.Name] = exp
				}
			}
		}
		o.expiries[namespace] = byName // nil when it could not be listed: "-" for its Clusters
	}
	exp, ok := byName[name]
	return exp, ok
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
