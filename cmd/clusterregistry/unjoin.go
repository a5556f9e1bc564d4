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

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
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

// removal is one object unjoin removes: how to say it, find it and delete it.
type removal struct {
	what string
	// get reports whether the object is there, and if it is not unjoin's to remove, why.
	get    func() (found bool, notOurs string, err error)
	delete func() error
}

// Run removes what join made, member first, saying what it did with each object.
func (o *UnjoinOptions) Run(ctx context.Context) error {
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	fac, out, name := o.factory, o.out, o.name
	namespace, registryKube := reg.Namespace, reg.Kube
	clusters := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace)
	cluster, err := clusters.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cluster = nil
	case err != nil:
		return fmt.Errorf("registry: reading cluster %s/%s (nothing was removed): %w", namespace, name, err)
	}

	var steps []removal
	switch {
	case o.RegistryOnly:
		fmt.Fprintln(out, "member: left alone (--registry-only)")
	case cluster == nil && o.MemberContext == "":
		fmt.Fprintf(out, "member: not looked at: cluster %s/%s, which names the member's server, is not in the registry; "+
			"give --member-context to remove what join made there\n", namespace, name)
	default:
		memberSteps, err := memberRemovals(ctx, out, fac, reg, name, cluster, o.MemberContext)
		if err != nil {
			return fmt.Errorf("%w (nothing was removed; --registry-only removes the registry's side alone)", err)
		}
		steps = append(steps, memberSteps...)
	}
	secrets := registryKube.CoreV1().Secrets(namespace)
	steps = append(steps,
		removal{
			what: fmt.Sprintf("registry: Cluster %s/%s", namespace, name),
			get:  func() (bool, string, error) { return cluster != nil, "", nil },
			delete: func() error {
				return clusters.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cluster.UID}})
			},
		},
		removal{
			what: fmt.Sprintf("registry: Secret %s/%s-token", namespace, name),
			get: func() (bool, string, error) {
				_, err := secrets.Get(ctx, name+"-token", metav1.GetOptions{})
				return found(err)
			},
			delete: func() error { return secrets.Delete(ctx, name+"-token", metav1.DeleteOptions{}) },
		})
	for _, step := range steps {
		there, notOurs, err := step.get()
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w (the lines above say what was removed)", step.what, err)
		case !there:
			fmt.Fprintf(out, "%s: not found\n", step.what)
			continue
		case notOurs != "":
			fmt.Fprintf(out, "%s: left in place: %s\n", step.what, notOurs)
			continue
		case o.dryRun:
			fmt.Fprintf(out, "%s: would be deleted (dry run)\n", step.what)
			continue
		}
		if err := step.delete(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: %w (the lines above say what was removed)", step.what, err)
		}
		fmt.Fprintf(out, "%s deleted\n", step.what)
	}
	return nil
}

// memberRemovals are the member's objects that join made for the Cluster: its service account,
// binding and namespace (and the account in kube-system that builds of main after v0.1.0 made
// before accounts had namespaces of their own), if they record this registry's Cluster as their
// owner. A service account that an
// earlier release's join made (named after the Cluster alone, and shared by every set that joined
// the member under that name) is named, and left in place.
func memberRemovals(ctx context.Context, out io.Writer, fac *factory, reg *registry, name string, cluster *v1alpha1.Cluster, memberContext string) ([]removal, error) {
	namespace := reg.Namespace
	if memberContext == "" {
		var err error
		if memberContext, err = contextFor(fac, cluster); err != nil {
			return nil, err
		}
	}
	member, server, err := fac.Member(memberContext)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "member: %s, through context %q\n", server, memberContext)
	memberKube, err := fac.MemberKube(member)
	if err != nil {
		return nil, err
	}
	regID := registryID(ctx, reg.Kube, reg.Config)
	account := memberAccount(regID, namespace, name)
	owned := func(meta metav1.Object, err error) (bool, string, error) {
		if there, _, err := found(err); !there || err != nil {
			return there, "", err
		}
		if !ownedBy(meta.GetAnnotations(), regID, namespace, name) {
			return true, fmt.Sprintf("it does not record this registry's cluster %s/%s as its owner", namespace, name), nil
		}
		return true, "", nil
	}
	// The member must answer before anything is removed anywhere.
	saNamespace := memberNamespace(account)
	ns, nsErr := memberKube.CoreV1().Namespaces().Get(ctx, saNamespace, metav1.GetOptions{})
	if nsErr != nil && !apierrors.IsNotFound(nsErr) {
		return nil, fmt.Errorf("member: reading Namespace %s on %s: %w", saNamespace, server, nsErr)
	}
	legacy := legacyMemberAccount(name)
	if old, err := memberKube.CoreV1().ServiceAccounts(legacyJoinNamespace).Get(ctx, legacy, metav1.GetOptions{}); err == nil && old.Annotations[annotationJoinedCluster] == "" {
		fmt.Fprintf(out, "member: ServiceAccount %s/%s, which join made before v0.2 and which every cluster set that joined this member as %q shares, "+
			"is left in place: once none uses it, delete it and ClusterRoleBinding %s to revoke its tokens\n", legacyJoinNamespace, legacy, name, legacy)
	}
	core, rbac := memberKube.CoreV1(), memberKube.RbacV1()
	steps := []removal{
		{
			what: "member: ClusterRoleBinding " + account,
			get: func() (bool, string, error) {
				b, err := rbac.ClusterRoleBindings().Get(ctx, account, metav1.GetOptions{})
				return owned(b, err)
			},
			delete: func() error { return rbac.ClusterRoleBindings().Delete(ctx, account, metav1.DeleteOptions{}) },
		},
		{
			// Deleted before its namespace, so that its tokens stop working at once, not when the
			// namespace's deletion reaches it.
			what: fmt.Sprintf("member: ServiceAccount %s/%s", saNamespace, account),
			get: func() (bool, string, error) {
				sa, err := core.ServiceAccounts(saNamespace).Get(ctx, account, metav1.GetOptions{})
				return owned(sa, err)
			},
			delete: func() error { return core.ServiceAccounts(saNamespace).Delete(ctx, account, metav1.DeleteOptions{}) },
		},
		{
			what: fmt.Sprintf("member: Namespace %s (with the Role and RoleBinding of the account's renewal, and its tokens' bindings)", saNamespace),
			get:  func() (bool, string, error) { return owned(ns, nsErr) },
			delete: func() error {
				return core.Namespaces().Delete(ctx, saNamespace, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(ns.UID))})
			},
		},
	}
	// What join made in kube-system in builds of main between v0.1.0 and this layout, if it is there.
	if _, err := core.ServiceAccounts(legacyJoinNamespace).Get(ctx, account, metav1.GetOptions{}); err == nil {
		steps = append(steps,
			removal{
				what: fmt.Sprintf("member: RoleBinding %s/%s", legacyJoinNamespace, account),
				get: func() (bool, string, error) {
					b, err := rbac.RoleBindings(legacyJoinNamespace).Get(ctx, account, metav1.GetOptions{})
					return owned(b, err)
				},
				delete: func() error {
					return rbac.RoleBindings(legacyJoinNamespace).Delete(ctx, account, metav1.DeleteOptions{})
				},
			},
			removal{
				what: fmt.Sprintf("member: Role %s/%s", legacyJoinNamespace, account),
				get: func() (bool, string, error) {
					r, err := rbac.Roles(legacyJoinNamespace).Get(ctx, account, metav1.GetOptions{})
					return owned(r, err)
				},
				delete: func() error { return rbac.Roles(legacyJoinNamespace).Delete(ctx, account, metav1.DeleteOptions{}) },
			},
			removal{
				what: fmt.Sprintf("member: ServiceAccount %s/%s", legacyJoinNamespace, account),
				get: func() (bool, string, error) {
					sa, err := core.ServiceAccounts(legacyJoinNamespace).Get(ctx, account, metav1.GetOptions{})
					return owned(sa, err)
				},
				delete: func() error {
					return core.ServiceAccounts(legacyJoinNamespace).Delete(ctx, account, metav1.DeleteOptions{})
				},
			})
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("member: reading ServiceAccount %s/%s on %s: %w", legacyJoinNamespace, account, server, err)
	}
	return steps, nil
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

// found turns a Get's error into whether the object is there.
func found(err error) (bool, string, error) {
	switch {
	case err == nil:
		return true, "", nil
	case apierrors.IsNotFound(err):
		return false, "", nil
	}
	return false, "", err
}
