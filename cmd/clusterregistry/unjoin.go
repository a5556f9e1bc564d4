package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/join"
)

// UnjoinOptions are unjoin's flags and what Complete makes of them, in the manner of kubectl's
// commands: Complete fills in, Validate checks without servers, Run does the work.
type UnjoinOptions struct {
	MemberContext string // the context that reaches the member; found by the Cluster's server when empty
	RegistryOnly  bool   // leave the member alone
	DryRun        *dryRunFlag

	name    string
	dryRun  bool
	factory *factory
	out     io.Writer
}

// Complete takes the Cluster's name and the dry-run strategy.
func (o *UnjoinOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.name, o.factory, o.out = args[0], f, cmd.OutOrStdout()
	var err error
	o.dryRun, err = o.DryRun.enabled()
	return err
}

// Validate refuses contradictory flags.
func (o *UnjoinOptions) Validate() error {
	if o.RegistryOnly && o.MemberContext != "" {
		return usageError{errors.New("--registry-only and --member-context conflict: --registry-only leaves the member alone")}
	}
	return nil
}

var (
	unjoinLong = `unjoin removes what join made for the Cluster NAME of the registry's -n namespace (cluster set):
on the member, the service account join made for this Cluster of this set and registry, its
ClusterRoleBinding and its namespace, which revokes every token of it; then, in the registry, the Cluster and its token
Secret. What other cluster sets or registries joined of the same member is left alone.

It reaches the member with the context of your kubeconfig whose server is the Cluster's
(--member-context chooses one). With --registry-only it leaves the member alone, for a member
that is gone or that your kubeconfig no longer reaches: the service account then stays, and its
token stays valid until it expires. If the member cannot be reached, nothing is removed from the
registry. With --dry-run it says what it would remove, and removes nothing. It says, for each
object, whether it was deleted or not found.`

	unjoinExample = `  # Undo: clusterregistry join kind-dev --name dev -n fleet
  clusterregistry unjoin dev -n fleet

  # See what it would remove
  clusterregistry unjoin dev -n fleet --dry-run

  # The member is gone: remove the Cluster and its Secret only
  clusterregistry unjoin dev -n fleet --registry-only`
)

func newUnjoin(fac *factory) *cobra.Command {
	o := &UnjoinOptions{}
	cmd := &cobra.Command{
		Use:     "unjoin NAME [--member-context CONTEXT | --registry-only] [--dry-run]",
		Short:   "Remove what join made for a Cluster, on the member and in the registry",
		Long:    unjoinLong,
		Example: unjoinExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w: the name of the Cluster to unjoin", err)}
			}
			return nil
		},
		RunE: runOptions(fac, o),
	}
	cmd.Flags().StringVar(&o.MemberContext, "member-context", "", "the kubeconfig context that reaches the member (default: the one whose server is the Cluster's)")
	cmd.Flags().BoolVar(&o.RegistryOnly, "registry-only", false, "remove the Cluster and its Secret only, leaving the member alone (a member that is gone)")
	o.DryRun = addDryRunFlag(cmd, "client", "says what it would remove, and removes nothing", nil)
	return cmd
}

// Run removes what join made, member first, saying what it did with each object (package
// join's Unjoin).
func (o *UnjoinOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	out, name, namespace := o.out, o.name, reg.Namespace
	// The Cluster names the member's server, and so the context that reaches it.
	cluster, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cluster = nil
	case err != nil:
		return fmt.Errorf("registry: reading cluster %s/%s (nothing was removed): %w", namespace, name, err)
	}
	opts := join.UnjoinOptions{DryRun: o.dryRun, Progress: out}
	switch {
	case o.RegistryOnly:
		fmt.Fprintln(out, "member: left alone (--registry-only)")
	case cluster == nil && o.MemberContext == "":
		fmt.Fprintf(out, "member: not looked at: cluster %s/%s, which names the member's server, is not in the registry; "+
			"give --member-context to remove what join made there\n", namespace, name)
	default:
		if opts.Member, err = o.member(cluster); err != nil {
			return fmt.Errorf("%w (nothing was removed; --registry-only removes the registry's side alone)", err)
		}
	}
	result, err := join.Unjoin(ctx, reg.join(), name, opts)
	if memberErr := (*join.MemberError)(nil); errors.As(err, &memberErr) {
		return fmt.Errorf("%w (nothing was removed; --registry-only removes the registry's side alone)", memberErr.Err)
	}
	if err == nil && cluster == nil && len(result.Deleted) == 0 {
		// As kubectl delete of an object that is not there: exit 1, so that a script with a
		// mistyped name does not carry on as if it had unjoined something.
		return fmt.Errorf("cluster %s/%s not found: nothing was unjoined (clusterregistry get -n %s lists the cluster set)", namespace, name, namespace)
	}
	return err
}

// member is the config of the context that reaches the Cluster's member: --member-context's, or
// the one whose server is the Cluster's.
func (o *UnjoinOptions) member(cluster *v1alpha1.Cluster) (*rest.Config, error) {
	memberContext := o.MemberContext
	if memberContext == "" {
		var err error
		if memberContext, err = contextFor(o.factory, cluster); err != nil {
			return nil, err
		}
	}
	member, server, err := o.factory.Member(memberContext)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.out, "member: %s, through context %q\n", server, memberContext)
	return member, nil
}

// contextFor is the context of the user's kubeconfig that reaches the Cluster's server: the
// current context if it does, else the first by name.
func contextFor(fac *factory, cluster *v1alpha1.Cluster) (string, error) {
	eps := cluster.Spec.KubernetesAPIEndpoints.ServerEndpoints
	if len(eps) == 0 {
		return "", fmt.Errorf("member: cluster %s/%s names no server; give --member-context", cluster.Namespace, cluster.Name)
	}
	want, err := access.ServerURL(eps[0].ServerAddress)
	if err != nil {
		return "", fmt.Errorf("member: cluster %s/%s: %w; give --member-context", cluster.Namespace, cluster.Name, err)
	}
	raw, err := fac.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	var matching []string
	for name, c := range raw.Contexts {
		if cl := raw.Clusters[c.Cluster]; cl != nil {
			if u, err := access.ServerURL(cl.Server); err == nil && u.String() == want.String() {
				matching = append(matching, name)
			}
		}
	}
	switch {
	case len(matching) == 0:
		return "", fmt.Errorf("member: no context of your kubeconfig reaches %s, cluster %s/%s's server; give --member-context",
			want, cluster.Namespace, cluster.Name)
	case slices.Contains(matching, raw.CurrentContext):
		return raw.CurrentContext, nil
	}
	slices.Sort(matching)
	return matching[0], nil
}
