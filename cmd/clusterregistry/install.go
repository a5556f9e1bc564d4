package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// fieldManager owns what the command applies.
const fieldManager = "clusterregistry"

// The ClusterRoles install makes. They aggregate into kubectl's view, edit and admin, so that
// whoever may view or edit a namespace may view or edit the cluster set it is.
const (
	viewRole = "clusterregistry-view"
	editRole = "clusterregistry-edit"
)

// InstallOptions are install's flags and what Complete makes of them: Complete fills in,
// Validate checks without servers, Run does the work.
type InstallOptions struct {
	CreateNamespace bool
	Output          string
	DryRun          *dryRunFlag

	dryRun  bool
	factory *factory
	cmd     *cobra.Command
}

// Complete takes the dry-run strategy.
func (o *InstallOptions) Complete(f *factory, cmd *cobra.Command, _ []string) error {
	o.factory, o.cmd = f, cmd
	var err error
	o.dryRun, err = o.DryRun.enabled()
	return err
}

// Validate refuses an -o that is not printed, or that no printer takes.
func (o *InstallOptions) Validate() error {
	switch {
	case o.Output != "yaml" && o.Output != "json":
		return usageError{fmt.Errorf("-o %q: want yaml or json", o.Output)}
	case !o.dryRun && o.cmd.Flags().Changed("output"):
		return usageError{errors.New("-o applies only to --dry-run=client, which prints the objects")}
	}
	return nil
}

// Run installs, or with --dry-run=client prints what it would install.
func (o *InstallOptions) Run(ctx context.Context) error {
	out := o.cmd.OutOrStdout()
	if o.dryRun {
		namespace := ""
		if o.CreateNamespace {
			var err error
			if namespace, _, err = o.factory.flags.ToRawKubeConfigLoader().Namespace(); err != nil {
				return err
			}
		}
		return printInstall(out, namespace, o.Output)
	}
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	ext, err := o.factory.Extensions()
	if err != nil {
		return err
	}
	namespace := ""
	if o.CreateNamespace {
		namespace = reg.Namespace
	}
	if err := install(ctx, out, ext, reg.Kube, namespace); err != nil {
		return err
	}
	// An -n without --create-namespace names a cluster set the user may expect to exist.
	if !o.CreateNamespace && reg.NamespaceGiven {
		if _, err := reg.Kube.CoreV1().Namespaces().Get(ctx, reg.Namespace, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			fmt.Fprintf(out, "note: namespace %s does not exist, so there is no such cluster set yet; --create-namespace makes it\n", reg.Namespace)
		}
	}
	return nil
}

var (
	installLong = `install makes the API server a cluster registry: it installs (or upgrades) the Cluster CRD, and
the ClusterRoles clusterregistry-view (read Clusters) and clusterregistry-edit (write them), which
aggregate into kubectl's view, and edit and admin: bind those in a namespace, and the namespace's
cluster set is readable, or writable, by whom you bind. With --create-namespace it also creates the
-n namespace, a cluster set.

It is idempotent: run it again, or from a newer release, to upgrade. It never downgrades a CRD that
a newer release installed. It prints what it did with each object.

With --dry-run=client it changes nothing and reaches no server: it prints the objects it would
apply (-o yaml or json), for kubectl apply or a GitOps repository.`

	installExample = `  # The current context's API server becomes a registry, with a cluster set "fleet"
  clusterregistry install --create-namespace -n fleet

  # Another context's
  clusterregistry install --context ops

  # The manifests, for GitOps
  clusterregistry install --dry-run=client --create-namespace -n fleet > registry.yaml`
)

func newInstall(f *factory) *cobra.Command {
	o := &InstallOptions{}
	cmd := &cobra.Command{
		Use:     "install [--create-namespace -n NAMESPACE]",
		Short:   "Make a Kubernetes API server a cluster registry",
		Long:    installLong,
		Example: installExample,
		Args:    usageArgs(cobra.NoArgs),
		RunE:    runOptions(f, o),
	}
	cmd.Flags().BoolVar(&o.CreateNamespace, "create-namespace", false, "also create the -n namespace, a cluster set")
	o.DryRun = addDryRunFlag(cmd, "client", "prints the objects install would apply, changing nothing",
		map[string]string{"server": "install cannot ask the server to check a CRD upgrade; --dry-run=client prints what it would apply"})
	cmd.Flags().StringVarP(&o.Output, "output", "o", "yaml", "with --dry-run=client: yaml or json")
	return cmd
}

// install does install's work in order, saying what it did as it goes, so that a failure part
// way leaves a record of what was done.
func install(ctx context.Context, out io.Writer, ext apiextensionsclient.Interface, kube kubernetes.Interface, namespace string) error {
	results, err := clusterregistry.Install(ctx, ext)
	if len(results) > 0 {
		fmt.Fprintln(out, results)
	}
	if err != nil {
		return fmt.Errorf("installing the registry's CRDs (nothing else was done): %w", err)
	}

	for _, r := range clusterRoles() {
		if _, err := kube.RbacV1().ClusterRoles().Apply(ctx, r.role, metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return fmt.Errorf("applying ClusterRole %s (the CRD is installed): %w", *r.role.Name, err)
		}
		fmt.Fprintf(out, "ClusterRole %s applied (aggregated into %v)\n", *r.role.Name, r.aggregates)
	}

	if namespace == "" {
		return nil
	}
	_, err = kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case err == nil:
		fmt.Fprintf(out, "Namespace %s exists\n", namespace)
		return nil
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading namespace %s (the CRD and ClusterRoles are installed): %w", namespace, err)
	}
	if _, err := kube.CoreV1().Namespaces().Apply(ctx, clusterSet(namespace), metav1.ApplyOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("creating namespace %s (the CRD and ClusterRoles are installed): %w", namespace, err)
	}
	fmt.Fprintf(out, "Namespace %s created, a cluster set\n", namespace)
	return nil
}

type installRole struct {
	role       *rbacv1ac.ClusterRoleApplyConfiguration
	aggregates []string
}

// clusterRoles are the ClusterRoles install applies, with the kubectl roles each aggregates into.
func clusterRoles() []installRole {
	var roles []installRole
	read := []string{"get", "list", "watch"}[:3:3] // appended to below, never in place
	for _, r := range []struct {
		name        string
		verbs       []string
		aggregates  []string
		description string
	}{
		{viewRole, read, []string{"view", "edit", "admin"}, "Reads a cluster set's Clusters, Placements, Releases and their status slices."},
		// An editor reads what it edits, even where no aggregation controller runs.
		{editRole, append(read, "create", "update", "patch", "delete", "deletecollection"), []string{"edit", "admin"},
			"Writes a cluster set's Clusters, Placements and Releases. Writing a Release acts on the set's members " +
				"with the power of their accounts: the releases controller applies what it names to every member its Placement chooses."},
	} {
		labels := map[string]string{}
		for _, to := range r.aggregates {
			labels["rbac.authorization.k8s.io/aggregate-to-"+to] = "true"
		}
		rules := []*rbacv1ac.PolicyRuleApplyConfiguration{
			rbacv1ac.PolicyRule().WithAPIGroups(v1alpha1.GroupName).WithResources("clusters", "placements", "releases").WithVerbs(r.verbs...),
			// Status slices are the releases controller's to write; everyone who may see a
			// Release may read them.
			rbacv1ac.PolicyRule().WithAPIGroups(v1alpha1.GroupName).WithResources("releasestatusslices").WithVerbs(read...),
			// So are a Release's revisions (rollout history), which the controller keeps.
			rbacv1ac.PolicyRule().WithAPIGroups("apps").WithResources("controllerrevisions").WithVerbs(read...),
		}
		roles = append(roles, installRole{
			role: rbacv1ac.ClusterRole(r.name).WithLabels(labels).
				WithAnnotations(map[string]string{"kubernetes.io/description": r.description}).WithRules(rules...),
			aggregates: r.aggregates,
		})
	}
	return roles
}

// clusterSet is the namespace install creates for a cluster set.
func clusterSet(namespace string) *corev1ac.NamespaceApplyConfiguration {
	return corev1ac.Namespace(namespace).WithLabels(map[string]string{v1alpha1.GroupName + "/cluster-set": "true"})
}

// printInstall writes what install applies as one List, for kubectl apply -f.
func printInstall(out io.Writer, namespace, output string) error {
	var items []any
	for _, crd := range clusterregistry.CRDs() {
		items = append(items, crd)
	}
	for _, r := range clusterRoles() {
		items = append(items, r.role)
	}
	if namespace != "" {
		items = append(items, clusterSet(namespace))
	}
	return writeObject(out, map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, output)
}
