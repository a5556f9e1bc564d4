package join

import (
	"context"
	"fmt"
	"io"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// UnjoinOptions shape an unjoin.
type UnjoinOptions struct {
	// Member is an administrator's config of the member, to remove what Join made there; nil
	// leaves the member alone (a member that is gone): its account then stays, and its token
	// stays valid until it expires.
	Member *rest.Config
	// DryRun says what would be removed, and removes nothing.
	DryRun bool
	// Progress hears one line for each object: deleted (or would be), not found, or left in
	// place and why; nil discards them.
	Progress io.Writer
}

// UnjoinResult is what Unjoin removed.
type UnjoinResult struct {
	// Deleted names each object deleted (with DryRun, each that would be), NotFound each that
	// was not there (or was already being deleted), and LeftInPlace each that is there but is
	// not this Cluster's to remove.
	Deleted, NotFound, LeftInPlace []string
}

// removal is one object Unjoin removes: how to say it, find it and delete it.
type removal struct {
	what string
	// get reports whether the object is there, and if it is not Unjoin's to remove, why (or, when
	// it is not there, what is said instead of "not found").
	get    func() (found bool, notOurs string, err error)
	delete func() error
}

// Unjoin removes what Join made for Cluster name of the registry's cluster set: on the member
// first (if opts.Member is given), then the Cluster and its token Secret in the registry. The
// member must answer before anything is removed anywhere: if it does not, the error is a
// *MemberError and nothing was removed. What is not there is not an error; what other cluster
// sets or registries made on the same member is left in place.
func Unjoin(ctx context.Context, reg Registry, name string, opts UnjoinOptions) (*UnjoinResult, error) {
	if err := reg.validate(); err != nil {
		return nil, err
	}
	out := opts.Progress
	if out == nil {
		out = io.Discard
	}
	namespace := reg.Namespace
	clusters := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace)
	cluster, err := clusters.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cluster = nil
	case err != nil:
		return nil, fmt.Errorf("registry: reading cluster %s/%s (nothing was removed): %w", namespace, name, err)
	}

	var steps []removal
	if opts.Member != nil {
		memberSteps, err := memberRemovals(ctx, out, reg, name, opts.Member)
		if err != nil {
			return nil, &MemberError{Err: err}
		}
		steps = memberSteps
	}
	secrets := reg.Kube.CoreV1().Secrets(namespace)
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
	if step, ok := agentRemoval(ctx, reg, name, cluster); ok {
		steps = append(steps, step)
	}
	result := &UnjoinResult{}
	for _, step := range steps {
		there, notOurs, err := step.get()
		switch {
		case err != nil:
			return result, fmt.Errorf("%s: %w (the lines above say what was removed)", step.what, err)
		case !there && notOurs != "":
			fmt.Fprintf(out, "%s: %s\n", step.what, notOurs)
			result.NotFound = append(result.NotFound, step.what)
			continue
		case !there:
			fmt.Fprintf(out, "%s: not found\n", step.what)
			result.NotFound = append(result.NotFound, step.what)
			continue
		case notOurs != "":
			fmt.Fprintf(out, "%s: left in place: %s\n", step.what, notOurs)
			result.LeftInPlace = append(result.LeftInPlace, step.what)
			continue
		case opts.DryRun:
			fmt.Fprintf(out, "%s: would be deleted (dry run)\n", step.what)
			result.Deleted = append(result.Deleted, step.what)
			continue
		}
		if err := step.delete(); err != nil && !apierrors.IsNotFound(err) {
			return result, fmt.Errorf("%s: %w (the lines above say what was removed)", step.what, err)
		}
		fmt.Fprintf(out, "%s deleted\n", step.what)
		result.Deleted = append(result.Deleted, step.what)
	}
	return result, nil
}

// agentRemoval removes the Cluster's tunnel agent from the registry, if a join made it: its
// ServiceAccount, which revokes its tokens, and its line in the set's agent.TokensRole. The agent
// is the one the Cluster names, or, with no Cluster, the one Join names by default; an agent
// ServiceAccount that does not record this Cluster as its owner is left in place, so that a
// Cluster's editor cannot have unjoin delete another's. There is no such step (false) for a
// Cluster dialled directly, or, with no Cluster, when there is no such ServiceAccount.
func agentRemoval(ctx context.Context, reg Registry, name string, cluster *v1alpha1.Cluster) (removal, bool) {
	agentName := name + "-agent"
	accounts := reg.Kube.CoreV1().ServiceAccounts(reg.Namespace)
	switch {
	case cluster != nil && cluster.Spec.KubernetesAPIEndpoints.Tunnel != nil:
		agentName = cluster.Spec.KubernetesAPIEndpoints.Tunnel.Agent
	case cluster != nil:
		return removal{}, false
	default:
		if _, err := accounts.Get(ctx, agentName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return removal{}, false
		}
	}
	want := owner(reg.ID(ctx), reg.Namespace, name)
	return removal{
		what: fmt.Sprintf("registry: ServiceAccount %s/%s, the tunnel agent's (and its tokens)", reg.Namespace, agentName),
		get: func() (bool, string, error) {
			sa, err := accounts.Get(ctx, agentName, metav1.GetOptions{})
			if there, _, err := found(err); !there || err != nil {
				return there, "", err
			}
			if !ownedBy(sa.Annotations, want) {
				return true, fmt.Sprintf("it does not record this registry's cluster %s/%s as its owner", reg.Namespace, name), nil
			}
			return true, "", nil
		},
		delete: func() error {
			if err := accounts.Delete(ctx, agentName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return listInTokensRole(ctx, reg, agentName, false)
		},
	}, true
}

// memberRemovals are the member's objects that Join made for the Cluster: its service account,
// binding and namespace (and the account in kube-system that builds of main after v0.1.0 made
// before accounts had namespaces of their own), if they record this registry's Cluster as their
// owner. A service account that an earlier release's join made (named after the Cluster alone,
// and shared by every set that joined the member under that name) is named, and left in place.
func memberRemovals(ctx context.Context, out io.Writer, reg Registry, name string, member *rest.Config) ([]removal, error) {
	namespace := reg.Namespace
	memberKube, err := kubernetes.NewForConfig(member)
	if err != nil {
		return nil, err
	}
	server := strings.TrimSuffix(member.Host, "/")
	regID := reg.ID(ctx)
	account := AccountFor(regID, namespace, name)
	want := owner(regID, namespace, name)
	owned := func(meta metav1.Object, err error) (bool, string, error) {
		if there, _, err := found(err); !there || err != nil {
			return there, "", err
		}
		if meta.GetDeletionTimestamp() != nil {
			return false, "already being deleted", nil
		}
		if !ownedBy(meta.GetAnnotations(), want) {
			return true, fmt.Sprintf("it does not record this registry's cluster %s/%s as its owner", namespace, name), nil
		}
		return true, "", nil
	}
	// The member must answer before anything is removed anywhere.
	core, rbac := memberKube.CoreV1(), memberKube.RbacV1()
	ns, nsErr := core.Namespaces().Get(ctx, account.Namespace, metav1.GetOptions{})
	if nsErr != nil && !apierrors.IsNotFound(nsErr) {
		return nil, fmt.Errorf("member: reading Namespace %s on %s: %w", account.Namespace, server, nsErr)
	}
	shared := legacySharedAccount(name)
	if old, err := core.ServiceAccounts(legacyAccountNamespace).Get(ctx, shared, metav1.GetOptions{}); err == nil && old.Annotations[ClusterAnnotation] == "" {
		fmt.Fprintf(out, "member: ServiceAccount %s/%s, which join made before v0.2 and which every cluster set that joined this member as %q shares, "+
			"is left in place: once none uses it, delete it and ClusterRoleBinding %s to revoke its tokens\n", legacyAccountNamespace, shared, name, shared)
	}
	binding := func(name string) removal {
		return removal{
			what: "member: ClusterRoleBinding " + name,
			get: func() (bool, string, error) {
				b, err := rbac.ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
				return owned(b, err)
			},
			delete: func() error { return rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}) },
		}
	}
	steps := []removal{
		binding(account.Name),
		binding(NamespaceCreatorBinding(account)),
		{
			// Deleted before its namespace, so that its tokens stop working at once, not when the
			// namespace's deletion reaches it.
			what: fmt.Sprintf("member: ServiceAccount %s", account),
			get: func() (bool, string, error) {
				sa, err := core.ServiceAccounts(account.Namespace).Get(ctx, account.Name, metav1.GetOptions{})
				return owned(sa, err)
			},
			delete: func() error {
				return core.ServiceAccounts(account.Namespace).Delete(ctx, account.Name, metav1.DeleteOptions{})
			},
		},
		{
			what: fmt.Sprintf("member: Namespace %s (with the Role and RoleBinding of the account's renewal, and its tokens' bindings)", account.Namespace),
			get:  func() (bool, string, error) { return owned(ns, nsErr) },
			delete: func() error {
				return core.Namespaces().Delete(ctx, account.Namespace, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(ns.UID))})
			},
		},
	}
	// What join made in kube-system in builds of main between v0.1.0 and this layout, if it is there.
	if _, err := core.ServiceAccounts(legacyAccountNamespace).Get(ctx, account.Name, metav1.GetOptions{}); err == nil {
		for _, o := range legacyObjects(ctx, memberKube, account.Name) {
			steps = append(steps, removal{
				what:   fmt.Sprintf("member: %s %s/%s", o.kind, legacyAccountNamespace, account.Name),
				get:    func() (bool, string, error) { return owned(o.get()) },
				delete: o.delete,
			})
		}
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("member: reading ServiceAccount %s/%s on %s: %w", legacyAccountNamespace, account.Name, server, err)
	}
	return steps, nil
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
