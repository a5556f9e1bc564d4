package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/trustflags"
)

// ExportOptions are export's flags and what Complete makes of them: Complete fills in, Validate
// checks without servers, Run does the work.
type ExportOptions struct {
	Format, Output, Selector         string
	CredentialCommand, ContextPrefix string
	TunnelProxy                      string
	AllNamespaces                    bool
	Trust                            trustflags.Flags

	factory *factory
	cmd     *cobra.Command
}

// Complete reads the trust flags into the Resolver's options.
func (o *ExportOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	o.factory, o.cmd = f, cmd
	var err error
	if _, err = o.Trust.ResolverOptions(); err != nil {
		return usageError{err}
	}
	return nil
}

// Validate refuses values no export takes, and kubeconfig flags with --format clusters.
func (o *ExportOptions) Validate() error {
	if o.Output != "yaml" && o.Output != "json" {
		return usageError{fmt.Errorf("-o %q: want yaml or json", o.Output)}
	}
	if _, err := labels.Parse(o.Selector); err != nil {
		return usageError{fmt.Errorf("-l/--selector: %w", err)}
	}
	switch o.Format {
	case "clusters":
		for _, name := range append([]string{"credential-command", "context-prefix", "tunnel-proxy"}, trustflags.Names...) {
			if o.cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s applies only to --format kubeconfig", name)}
			}
		}
	case "kubeconfig":
		if o.TunnelProxy != "" {
			if _, _, err := net.SplitHostPort(o.TunnelProxy); err != nil {
				return usageError{fmt.Errorf("--tunnel-proxy %q: want host:port, where clusterregistry tunnel-proxy listens", o.TunnelProxy)}
			}
		}
	default:
		return usageError{fmt.Errorf("--format %q: want clusters or kubeconfig", o.Format)}
	}
	return nil
}

// Run lists the Clusters and writes them in the format asked for.
func (o *ExportOptions) Run(ctx context.Context) error {
	cmd := o.cmd
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	namespace := reg.Namespace
	if o.AllNamespaces {
		namespace = metav1.NamespaceAll
	}
	list, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace).List(ctx, metav1.ListOptions{LabelSelector: o.Selector})
	if err != nil {
		return fmt.Errorf("listing the Clusters of namespace %q: %w", namespace, err)
	}
	if len(list.Items) == 0 && !o.AllNamespaces {
		if err := reg.ClusterSetExists(ctx, namespace); err != nil {
			return err
		}
	}
	if len(list.Items) == 0 {
		// As kubectl get says it; the file is still a valid, empty list.
		where := fmt.Sprintf("in namespace %s", namespace)
		if o.AllNamespaces {
			where = "in any namespace"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "No Clusters found %s.\n", where)
	}
	if o.Format == "clusters" {
		if err := writeClusters(cmd.OutOrStdout(), list.Items, o.Output); err != nil {
			return err
		}
		if n := pointingAtSecrets(list.Items); n > 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: %d of the %d Clusters point at Secrets, which export leaves out as they hold credentials: "+
				"copy them to where you import the file (import names the ones it misses)\n", n, len(list.Items))
		}
		return nil
	}
	credentialArgs, err := registryArgs(o.factory.flags)
	if err != nil {
		return err
	}
	command := o.CredentialCommand
	if command == "" {
		if command, err = os.Executable(); err != nil {
			return fmt.Errorf("finding this command's path for the kubeconfig; give --credential-command: %w", err)
		}
	}
	resolver, err := o.Trust.ToResolver(reg.Kube, "clusterregistry-export")
	if err != nil {
		return usageError{err}
	}
	return exportKubeconfig(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), resolver, list.Items, kubeconfigExport{
		command: command, args: append(credentialArgs, o.Trust.Args()...), qualify: o.AllNamespaces, prefix: o.ContextPrefix, output: o.Output,
		tunnelProxy: o.TunnelProxy,
	})
}

var (
	exportLong = `export writes the Clusters it selects.

With --format clusters (the default) it writes one ClusterList: what import and
multicluster.LoadMembers reads. It keeps what people write (names, namespaces, labels, annotations,
spec) and drops what the server and controllers fill in (uid, resourceVersion, managed fields,
status), so that an export imported again changes nothing. Clusters hold pointers, not
credentials, so the file holds none either.

With --format kubeconfig it writes a kubeconfig with one context per Cluster (named after the
Cluster; namespace/name with -A), so that kubectl reaches each member through the registry. Each
context's server and CA are the ones the Cluster resolves to here, as the SDK's tools resolve it
(so export reads the Secrets it points to, with your registry credentials). Its user is an exec
entry running "clusterregistry credential" against this registry (the kubeconfig file and
context export was given, and -n), which fetches the credentials when kubectl needs them: no
credential is written to the file. The trust flags (--allow-exec, --allow-exec-args,
--allow-exec-any-args, --file-root, --send-to, --prefer) apply to export and are written into
each entry. A Cluster that does not resolve is
named on standard error and left out, and export exits 1. The kubeconfig sets no current context,
so that merged with yours (KUBECONFIG=~/.kube/config:fleet.kubeconfig) it does not change which
cluster kubectl talks to; --context-prefix keeps its contexts apart from yours.`

	exportExample = `  # Keep the fleet cluster set in git
  clusterregistry export -n fleet > fleet.yaml

  # Production members of every cluster set, as JSON
  clusterregistry export -A -l env=prod -o json

  # Reach every member of the fleet with kubectl, through the registry
  clusterregistry export -n fleet --format kubeconfig > fleet.kubeconfig
  kubectl --kubeconfig fleet.kubeconfig --context prod-eu-1 get nodes`
)

func newExport(fac *factory) *cobra.Command {
	o := &ExportOptions{}
	cmd := &cobra.Command{
		Use:     "export [-n NAMESPACE | -A] [-l SELECTOR] [--format clusters|kubeconfig] [-o yaml|json]",
		Short:   "Write the selected Clusters as a flat file, or as a kubeconfig that reaches them",
		Long:    exportLong,
		Example: exportExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(fac, o),
	}
	f := cmd.Flags()
	f.StringVar(&o.Format, "format", "clusters", `what to write: "clusters", a ClusterList, or "kubeconfig"`)
	f.StringVarP(&o.Output, "output", "o", "yaml", "yaml or json")
	f.StringVarP(&o.Selector, "selector", "l", "", "label selector over the Clusters, e.g. env=prod")
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "export the Clusters of every namespace (cluster set)")
	f.StringVar(&o.CredentialCommand, "credential-command", "", "the command the kubeconfig runs for credentials (default: this command's path)")
	f.StringVar(&o.TunnelProxy, "tunnel-proxy", "", "with --format kubeconfig: the address (host:port) of clusterregistry tunnel-proxy, which kubectl reaches tunnelled members through (their proxy-url); without it, such members are left out")
	f.StringVar(&o.ContextPrefix, "context-prefix", "", `with --format kubeconfig: put this before each context's name (e.g. "fleet-"), so that the contexts do not collide with your own when kubeconfigs are merged (KUBECONFIG=a:b keeps the first of two contexts of one name)`)
	o.Trust.AddFlags(f)
	return cmd
}

// portable is c as people wrote it: no server-filled metadata, no status.
func portable(c v1alpha1.Cluster) v1alpha1.Cluster {
	return v1alpha1.Cluster{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels,
			Annotations: c.Annotations},
		Spec: c.Spec,
	}
}

// pointingAtSecrets counts the Clusters with a secret or kubeconfig-secret provider.
func pointingAtSecrets(clusters []v1alpha1.Cluster) int {
	n := 0
	for _, c := range clusters {
		for _, p := range c.Spec.AuthInfo.Providers {
			if p.Type.Name == v1alpha1.ProviderTypeSecret || p.Type.Name == v1alpha1.ProviderTypeKubeconfigSecret {
				n++
				break
			}
		}
	}
	return n
}

func writeClusters(w io.Writer, clusters []v1alpha1.Cluster, output string) error {
	list := v1alpha1.ClusterList{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ClusterList"},
		Items: []v1alpha1.Cluster{}} // items: [], not null, when there are none
	for _, c := range clusters {
		list.Items = append(list.Items, portable(c))
	}
	return writeObject(w, list, output)
}
