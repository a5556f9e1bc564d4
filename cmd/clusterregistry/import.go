package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// errSomeFailed is import's error when some objects were not applied; the report names them.
var errSomeFailed = errors.New("some Clusters were not imported")

func newImport(registry *genericclioptions.ConfigFlags) *cobra.Command {
	var dryRun string
	var force, fromKubeconfig, dropCredentialArgs bool
	var output appliedOutput
	cmd := &cobra.Command{
		Use:   "import FILE [-o yaml|json|name]",
		Short: "Apply a file of Clusters to the registry",
		Long: `import reads a ClusterList (or a List of Clusters, as export and kubectl get -o yaml write) and
applies each Cluster to the registry with server-side apply. Every Cluster is first checked as
the server would check it; one that fails is reported, naming the Cluster and the field, and not
applied, while the others are. Clusters without a namespace go to -n's. It prints one line per
Cluster (created, configured, unchanged, or why not) and exits 1 if any was not imported.

With --from-kubeconfig it reads a kubeconfig instead and makes a Cluster of each context, named
after it: the context's server and CA, its user's exec plugin (if it runs one) as an exec
provider, and a kubeconfig-file provider naming the file and context. No credential of the file
is copied into the registry: not the plugin's environment, and not an argument that passes a
credential (such as --oidc-client-secret=...); a context whose plugin has one is refused, or with
--drop-credential-args imported without it.`,
		Example: `  # Restore the fleet cluster set from git
  clusterregistry import fleet.yaml

  # See what would change, without changing anything
  clusterregistry import fleet.yaml --dry-run=server

  # Every context of a kubeconfig, as Clusters of the fleet cluster set
  clusterregistry import --from-kubeconfig ~/.kube/config -n fleet

  # The names of the Clusters applied, for a script (the report goes to stderr)
  clusterregistry import fleet.yaml -o name`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w: the file to import", err)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if dryRun != "none" && dryRun != "server" {
				return usageError{fmt.Errorf("--dry-run=%s: want server or none", dryRun)}
			}
			if err := output.validate(); err != nil {
				return err
			}
			var clusters []v1alpha1.Cluster
			var problems, notes []string
			var err error
			if fromKubeconfig {
				clusters, problems, notes, err = clustersFromKubeconfig(args[0], dropCredentialArgs)
			} else {
				if dropCredentialArgs {
					return usageError{fmt.Errorf("--%s goes with --from-kubeconfig", dropCredentialArgsFlag)}
				}
				clusters, err = readClusters(args[0])
			}
			if err != nil {
				return err
			}
			cfg, namespace, err := connect(registry)
			if err != nil {
				return err
			}
			client, err := versioned.NewForConfig(cfg)
			if err != nil {
				return err
			}
			for _, n := range notes {
				fmt.Fprintln(output.report(cmd), "note: "+n)
			}
			return importClusters(cmd.Context(), output.report(cmd), cmd.OutOrStdout(), &output, client, args[0], clusters, problems, namespace, dryRun == "server", force)
		},
	}
	cmd.Flags().StringVar(&dryRun, "dry-run", "none", `"server" asks the registry to check each change without making it`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "server"
	cmd.Flags().BoolVar(&force, "force-conflicts", false, "take over fields that another field manager owns")
	cmd.Flags().BoolVar(&fromKubeconfig, "from-kubeconfig", false, "FILE is a kubeconfig: import a Cluster for each of its contexts")
	cmd.Flags().BoolVar(&dropCredentialArgs, dropCredentialArgsFlag, false, "with --from-kubeconfig: leave out exec plugin arguments that pass a credential (--client-secret=..., --password ...) instead of refusing the context")
	output.addFlag(cmd)
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

// importClusters validates and applies each Cluster, one report line each, after a line for each
// of the problems found while reading the file.
//
// The applied Clusters go to stdout as output asks, once all are applied, those that failed left
// out.
func importClusters(ctx context.Context, out, stdout io.Writer, output *appliedOutput, client versioned.Interface, path string, clusters []v1alpha1.Cluster, problems []string, namespace string, dryRun, force bool) error {
	var applied []*v1alpha1.Cluster
	for _, p := range problems {
		fmt.Fprintln(out, p)
	}
	failed := len(problems)
	for i := range clusters {
		c := portable(clusters[i])
		if c.Namespace == "" {
			c.Namespace = namespace
		}
		name := fmt.Sprintf("%s: cluster %s/%s", path, c.Namespace, c.Name)
		if clusters[i].Kind != "" && clusters[i].Kind != "Cluster" {
			fmt.Fprintf(out, "%s: items[%d] is a %s, not a Cluster; not imported\n", path, i, clusters[i].Kind)
			failed++
			continue
		}
		if errs := v1alpha1.ValidateCluster(&c); len(errs) > 0 {
			fmt.Fprintf(out, "%s: invalid, not imported: %v\n", name, errs.ToAggregate())
			failed++
			continue
		}
		after, what, err := applyCluster(ctx, client, &c, dryRun, force)
		if err != nil {
			fmt.Fprintf(out, "%s: not imported: %v\n", name, err)
			failed++
			continue
		}
		if dryRun {
			what += " (server dry run)"
		}
		fmt.Fprintf(out, "%s: %s\n", name, what)
		applied = append(applied, after)
	}
	if err := output.print(stdout, applied); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d, named above", errSomeFailed, failed, len(clusters)+len(problems))
	}
	return nil
}

// applyCluster applies c, and returns the Cluster as the registry has it after and whether it
// was created, configured or unchanged.
func applyCluster(ctx context.Context, client versioned.Interface, c *v1alpha1.Cluster, dryRun, force bool) (*v1alpha1.Cluster, string, error) {
	clusters := client.ClusterregistryV1alpha1().Clusters(c.Namespace)
	before, err := clusters.Get(ctx, c.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		before = nil
	case err != nil:
		return nil, "", err
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, "", err
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	after, err := clusters.Patch(ctx, c.Name, types.ApplyPatchType, data, opts)
	if err != nil {
		if apierrors.IsConflict(err) {
			return nil, "", fmt.Errorf("%w; give --force-conflicts to take the fields over", err)
		}
		return nil, "", err
	}
	switch {
	case before == nil:
		return after, "created", nil
	case before.ResourceVersion != after.ResourceVersion:
		return after, "configured", nil
	}
	return after, "unchanged", nil
}
