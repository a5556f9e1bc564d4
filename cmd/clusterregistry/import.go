package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/clusterapply"
	"github.com/cluster-registry/sdk/shard"
)

// errSomeFailed is import's error when some objects were not applied; the report names them.
var errSomeFailed = errors.New("some Clusters were not imported")

// ImportOptions are import's flags and what Complete makes of them: Complete fills in, Validate
// checks without servers, Run does the work.
type ImportOptions struct {
	DryRun             *dryRunFlag
	Force              bool
	FromKubeconfig     bool
	DropCredentialArgs bool
	ShardBuckets       bool
	Output             appliedOutput

	path    string
	dryRun  bool
	factory *factory
	cmd     *cobra.Command
}

// Complete takes the file and the dry-run strategy.
func (o *ImportOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.path, o.factory, o.cmd = args[0], f, cmd
	var err error
	o.dryRun, err = o.DryRun.enabled()
	return err
}

// Validate refuses flags that do not go together, and an -o no printer takes.
func (o *ImportOptions) Validate() error {
	if o.DropCredentialArgs && !o.FromKubeconfig {
		return usageError{fmt.Errorf("--%s goes with --from-kubeconfig", dropCredentialArgsFlag)}
	}
	return o.Output.validate()
}

// Run reads the file and imports its Clusters.
func (o *ImportOptions) Run(ctx context.Context) error {
	var clusters []v1alpha1.Cluster
	var problems, notes []string
	var err error
	if o.FromKubeconfig {
		clusters, problems, notes, err = clustersFromKubeconfig(o.path, o.DropCredentialArgs)
	} else {
		clusters, err = readClusters(o.path)
	}
	if err != nil {
		return err
	}
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	report := o.Output.report(o.cmd)
	for _, n := range notes {
		fmt.Fprintln(report, "note: "+n)
	}
	// As kubectl apply: an -n that contradicts the file's namespaces is refused, not ignored.
	run := importRun{out: report, stdout: o.cmd.OutOrStdout(), output: &o.Output, client: reg.Clusters, secrets: reg.Kube.CoreV1(),
		path: o.path, namespace: reg.Namespace, enforceNamespace: reg.NamespaceGiven, dryRun: o.dryRun, force: o.Force, shardBuckets: o.ShardBuckets}
	return run.run(ctx, clusters, problems)
}

var (
	importLong = `import reads a ClusterList (or a List of Clusters, as export and kubectl get -o yaml write) and
applies each Cluster to the registry with server-side apply. Every Cluster is first checked as
the server would check it; one that fails is reported, naming the Cluster and the field, and not
applied, while the others are. Clusters without a namespace go to -n's. It prints one line per
Cluster (created, configured, unchanged, or why not) and exits 1 if any was not imported.

With --from-kubeconfig it reads a kubeconfig instead and makes a Cluster of each context, named
after it: the context's server and CA, its user's exec plugin (if it runs one) as an exec
provider, and a kubeconfig-file provider naming the file and context. No credential of the file
is copied into the registry: not the plugin's environment, and not an argument that passes a
credential (such as --oidc-client-secret=...); a context whose plugin has one is refused, or with
--drop-credential-args imported without it.`

	importExample = `  # Restore the fleet cluster set from git
  clusterregistry import fleet.yaml

  # See what would change, without changing anything
  clusterregistry import fleet.yaml --dry-run=server

  # Every context of a kubeconfig, as Clusters of the fleet cluster set
  clusterregistry import --from-kubeconfig ~/.kube/config -n fleet

  # The names of the Clusters applied, for a script (the report goes to stderr)
  clusterregistry import fleet.yaml -o name

  # Give the Clusters of a file, or those already registered (export, then import), their shard
  # buckets
  clusterregistry export -n fleet > fleet.yaml && clusterregistry import fleet.yaml --shard-buckets`
)

func newImport(f *factory) *cobra.Command {
	o := &ImportOptions{}
	cmd := &cobra.Command{
		Use:     "import FILE [-o yaml|json|name|jsonpath=...]",
		Short:   "Apply a file of Clusters to the registry",
		Long:    importLong,
		Example: importExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w: the file to import", err)}
			}
			return nil
		},
		RunE: runOptions(f, o),
	}
	o.DryRun = addDryRunFlag(cmd, "server", "asks the registry to check each change without making it", nil)
	cmd.Flags().BoolVar(&o.Force, "force-conflicts", false, "take over fields that another field manager owns")
	cmd.Flags().BoolVar(&o.FromKubeconfig, "from-kubeconfig", false, "FILE is a kubeconfig: import a Cluster for each of its contexts")
	cmd.Flags().BoolVar(&o.ShardBuckets, "shard-buckets", false, "label each Cluster that has no "+shard.BucketLabel+" label with its bucket, so that a --shard-group's replicas each watch only the Clusters they own (without it, the file is applied as it is)")
	cmd.Flags().BoolVar(&o.DropCredentialArgs, dropCredentialArgsFlag, false, "with --from-kubeconfig: leave out exec plugin arguments that pass a credential (--client-secret=..., --password ...) instead of refusing the context")
	o.Output.addFlag(cmd)
	return cmd
}

func readClusters(path string) ([]v1alpha1.Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list v1alpha1.ClusterList
	if err := yaml.UnmarshalStrict(data, &list); err != nil {
		return nil, fmt.Errorf("%s: not a ClusterList: %w", path, err)
	}
	return list.Items, nil
}

// importRun is one import: where it reports, what it applies with, and how.
type importRun struct {
	out, stdout io.Writer // the report; the applied Clusters, as output asks
	output      *appliedOutput
	client      versioned.Interface
	secrets     corev1client.SecretsGetter // to say which Secrets the applied Clusters lack
	path        string
	// namespace is where Clusters without one go; with enforceNamespace (-n given), a Cluster of
	// another namespace is refused, as kubectl apply refuses it.
	namespace        string
	enforceNamespace bool
	dryRun, force    bool
	// shardBuckets labels each Cluster that has no shard bucket with its own (shard.SetBucket).
	shardBuckets bool
}

// run validates and applies each Cluster, one report line each, after a line for each of the
// problems found while reading the file, and warns of the Secrets an applied Cluster points at
// that its namespace lacks. The applied Clusters go to stdout as output asks, once all are
// applied, those that failed left out. A Cluster whose namespace contradicts -n stops the import
// before anything is applied.
func (r *importRun) run(ctx context.Context, clusters []v1alpha1.Cluster, problems []string) error {
	if r.enforceNamespace {
		var mismatched []string
		for _, c := range clusters {
			if c.Namespace != "" && c.Namespace != r.namespace {
				mismatched = append(mismatched, fmt.Sprintf("%s/%s", c.Namespace, c.Name))
			}
		}
		if len(mismatched) > 0 {
			return fmt.Errorf("%s: %d Clusters are of other namespaces than -n %s (%s); nothing was imported: "+
				"give the file's namespace with -n, or remove metadata.namespace from the file to import them into %s",
				r.path, len(mismatched), r.namespace, strings.Join(mismatched, ", "), r.namespace)
		}
	}
	var applied []*v1alpha1.Cluster
	for _, p := range problems {
		fmt.Fprintln(r.out, p)
	}
	failed := len(problems)
	for i := range clusters {
		c := portable(clusters[i])
		if c.Namespace == "" {
			c.Namespace = r.namespace
		}
		if r.shardBuckets {
			shard.SetBucket(&c)
		}
		name := fmt.Sprintf("%s: cluster %s/%s", r.path, c.Namespace, c.Name)
		if clusters[i].Kind != "" && clusters[i].Kind != "Cluster" {
			fmt.Fprintf(r.out, "%s: items[%d] is a %s, not a Cluster; not imported\n", r.path, i, clusters[i].Kind)
			failed++
			continue
		}
		if errs := v1alpha1.ValidateCluster(&c); len(errs) > 0 {
			fmt.Fprintf(r.out, "%s: invalid, not imported: %v\n", name, errs.ToAggregate())
			failed++
			continue
		}
		after, what, err := applyCluster(ctx, r.client, &c, r.dryRun, r.force)
		if err != nil {
			fmt.Fprintf(r.out, "%s: not imported: %v\n", name, err)
			failed++
			continue
		}
		if r.dryRun {
			what += " (server dry run)"
		}
		fmt.Fprintf(r.out, "%s: %s\n", name, what)
		for _, warning := range missingSecrets(ctx, r.secrets, after) {
			fmt.Fprintf(r.out, "%s: warning: %s\n", name, warning)
		}
		applied = append(applied, after)
	}
	if err := r.output.print(r.stdout, applied); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d, named above", errSomeFailed, failed, len(clusters)+len(problems))
	}
	return nil
}

// missingSecrets says which Secrets that c's secret and kubeconfig-secret providers point at are
// not in the registry (or cannot be read): export and import carry Clusters, not the Secrets that
// hold credentials, so a cluster set imported elsewhere points at Secrets that are not there.
func missingSecrets(ctx context.Context, secrets corev1client.SecretsGetter, c *v1alpha1.Cluster) []string {
	var warnings []string
	for _, p := range c.Spec.AuthInfo.Providers {
		ref, ok := access.SecretOf(c, p)
		if !ok {
			continue
		}
		namespace, name := ref.Namespace, ref.Name
		if name == "" || len(validation.IsDNS1123Subdomain(name)) > 0 || len(validation.IsDNS1123Label(namespace)) > 0 {
			continue // the Resolver says what is wrong with such a pointer
		}
		_, err := secrets.Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			warnings = append(warnings, fmt.Sprintf("provider %q points at Secret %s/%s, which is not there: the Cluster resolves only once it is "+
				"(import carries Clusters, not the Secrets that hold their credentials)", p.Name, namespace, name))
		case err != nil:
			warnings = append(warnings, fmt.Sprintf("provider %q points at Secret %s/%s, which could not be checked: %v", p.Name, namespace, name, err))
		}
	}
	return warnings
}

// applyCluster applies c as the command, and returns the Cluster as the registry has it after and
// whether it was created, configured or left unchanged.
func applyCluster(ctx context.Context, client versioned.Interface, c *v1alpha1.Cluster, dryRun, force bool) (*v1alpha1.Cluster, string, error) {
	after, what, err := clusterapply.Apply(ctx, client, c, fieldManager, dryRun, force)
	if apierrors.IsConflict(err) {
		return nil, "", fmt.Errorf("%w; give --force-conflicts to take the fields over", err)
	}
	return after, what, err
}
