package join

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/boundtoken"
)

// grants are what a join's account may do on the member: its ClusterRole, and, only when asked,
// the creation of namespaces.
type grants struct {
	role       string
	namespaces bool
	// tunnel lets the account replace its tunnel agent's token (TunnelOptions).
	tunnel bool
}

// applyAccount makes, on the member, the account's namespace, the account, its binding to the
// ClusterRole (and to NamespaceCreatorRole, when granted), and its right to renew its own tokens
// (boundtoken.Rules), all owner-annotated.
//
// It reports whether the account is new: made by this call, so that a later step's failure may
// take it away again (undoAccount) rather than leave a half-made join behind. An account that was
// there before belongs to an earlier join, whose token may be in use, and is never undone.
func applyAccount(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, account Account, g grants, owner map[string]string, fieldManager string) (isNew bool, err error) {
	switch ns, err := memberKube.CoreV1().Namespaces().Get(ctx, account.Namespace, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
		isNew = true
	case err != nil:
		return false, fmt.Errorf("member: reading Namespace %s (nothing was done): %w", account.Namespace, err)
	case !ownedBy(ns.Annotations, owner):
		return false, fmt.Errorf("member: Namespace %s exists and is not this Cluster's (it does not record it as its owner); nothing was done", account.Namespace)
	case ns.DeletionTimestamp != nil:
		return false, fmt.Errorf("member: Namespace %s is being deleted (an unjoin); nothing was done: join again once it is gone", account.Namespace)
	}
	return isNew, makeAccount(ctx, out, memberKube, account, g, owner, fieldManager)
}

func makeAccount(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, account Account, g grants, owner map[string]string, fieldManager string) error {
	clusterRole := g.role
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if _, err := memberKube.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace(account.Namespace).WithAnnotations(owner), apply); err != nil {
		return fmt.Errorf("member: creating Namespace %s (nothing was done): %w", account.Namespace, err)
	}
	sa := corev1ac.ServiceAccount(account.Name, account.Namespace).WithAnnotations(owner)
	if _, err := memberKube.CoreV1().ServiceAccounts(account.Namespace).Apply(ctx, sa, apply); err != nil {
		return fmt.Errorf("member: creating service account %s (its namespace is made; unjoin removes it): %w", account, err)
	}
	fmt.Fprintf(out, "member: Namespace %s and ServiceAccount %s applied\n", account.Namespace, account)
	subject := rbacv1ac.Subject().WithKind("ServiceAccount").WithNamespace(account.Namespace).WithName(account.Name)
	binding := rbacv1ac.ClusterRoleBinding(account.Name).WithAnnotations(owner).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(clusterRole)).
		WithSubjects(subject)
	if _, err := memberKube.RbacV1().ClusterRoleBindings().Apply(ctx, binding, apply); err != nil {
		return fmt.Errorf("member: binding %s to ClusterRole %s (the service account is made; unjoin removes it): %w", account.Name, clusterRole, err)
	}
	fmt.Fprintf(out, "member: ClusterRoleBinding %s to ClusterRole %s applied\n", account.Name, clusterRole)
	if err := namespaceCreation(ctx, out, memberKube, account, subject, g.namespaces, owner, apply); err != nil {
		return err
	}
	// The account may renew its own token, bound to a Secret of its namespace, and nothing else:
	// a rotator renews the token with the token (package rotation).
	var rules []*rbacv1ac.PolicyRuleApplyConfiguration
	for _, r := range boundtoken.Rules(account.Name) {
		rules = append(rules, rbacv1ac.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...).WithResourceNames(r.ResourceNames...))
	}
	if g.tunnel {
		rules = append(rules, agentSecretRule())
	}
	if _, err := memberKube.RbacV1().Roles(account.Namespace).Apply(ctx, rbacv1ac.Role(account.Name, account.Namespace).WithAnnotations(owner).WithRules(rules...), apply); err != nil {
		return fmt.Errorf("member: granting %s the renewal of its own token (its service account and binding are made; unjoin removes them): %w", account.Name, err)
	}
	renewBinding := rbacv1ac.RoleBinding(account.Name, account.Namespace).WithAnnotations(owner).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(account.Name)).
		WithSubjects(subject)
	if _, err := memberKube.RbacV1().RoleBindings(account.Namespace).Apply(ctx, renewBinding, apply); err != nil {
		return fmt.Errorf("member: binding %s to the renewal of its own token (its service account and binding are made; unjoin removes them): %w", account.Name, err)
	}
	fmt.Fprintf(out, "member: Role and RoleBinding %s applied: the account may renew its own token, nothing else\n", account)
	return nil
}

// NamespaceCreatorRole is the ClusterRole that lets join's accounts create namespaces, and do
// nothing else with them: a Release with createNamespace makes its target namespace on members,
// and join's default role (edit) may not create one. Join binds an account to it only when asked
// (Options.AllowNamespaceCreation, join --allow-namespace-creation). Every join on a member that
// asks shares it; unjoin leaves it in place (it grants nothing by itself) and removes the
// account's binding to it.
const NamespaceCreatorRole = "clusterregistry-namespace-creator"

// NamespaceCreatorBinding is the name of the ClusterRoleBinding of account to NamespaceCreatorRole.
func NamespaceCreatorBinding(account Account) string { return account.Name + "-namespaces" }

// namespaceCreation grants account the creation of namespaces when allow says so, and otherwise
// takes away a grant an earlier join of the same Cluster made: a join gives exactly what it is
// asked for, run again too.
func namespaceCreation(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, account Account, subject *rbacv1ac.SubjectApplyConfiguration,
	allow bool, owner map[string]string, apply metav1.ApplyOptions) error {
	if allow {
		if err := allowNamespaceCreation(ctx, memberKube, account, subject, owner, apply); err != nil {
			return err
		}
		fmt.Fprintf(out, "member: ClusterRoleBinding %s to ClusterRole %s applied: the account may create namespaces (a Release's createNamespace)\n",
			NamespaceCreatorBinding(account), NamespaceCreatorRole)
		return nil
	}
	name := NamespaceCreatorBinding(account)
	b, err := memberKube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("member: reading ClusterRoleBinding %s, an earlier join's grant of namespace creation: %w", name, err)
	case !ownedBy(b.Annotations, owner):
		return nil // not this Cluster's: someone else's grant, not join's to take
	}
	if err := memberKube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("member: deleting ClusterRoleBinding %s, an earlier join's grant of namespace creation (join again with --allow-namespace-creation to keep it): %w", name, err)
	}
	fmt.Fprintf(out, "member: ClusterRoleBinding %s deleted: the account may no longer create namespaces (join with --allow-namespace-creation to grant it)\n", name)
	return nil
}

// allowNamespaceCreation applies NamespaceCreatorRole and binds account to it.
func allowNamespaceCreation(ctx context.Context, memberKube kubernetes.Interface, account Account, subject *rbacv1ac.SubjectApplyConfiguration,
	owner map[string]string, apply metav1.ApplyOptions) error {
	role := rbacv1ac.ClusterRole(NamespaceCreatorRole).
		WithRules(rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("namespaces").WithVerbs("create"))
	if _, err := memberKube.RbacV1().ClusterRoles().Apply(ctx, role, apply); err != nil {
		return fmt.Errorf("member: applying ClusterRole %s (the service account and its binding are made; unjoin removes them): %w", NamespaceCreatorRole, err)
	}
	binding := rbacv1ac.ClusterRoleBinding(NamespaceCreatorBinding(account)).WithAnnotations(owner).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(NamespaceCreatorRole)).
		WithSubjects(subject)
	if _, err := memberKube.RbacV1().ClusterRoleBindings().Apply(ctx, binding, apply); err != nil {
		return fmt.Errorf("member: binding %s to ClusterRole %s (the service account and its binding are made; unjoin removes them): %w", account.Name, NamespaceCreatorRole, err)
	}
	return nil
}

// undoAccount takes away an account that this run of Join made (applyAccount said it was new),
// after a later step failed: the ClusterRoleBinding, then the namespace, with the service account,
// the Role and RoleBinding and any token in it. It returns the failed step's error, saying that
// the account was undone, or what is left when the undo failed too.
func undoAccount(ctx context.Context, memberKube kubernetes.Interface, account Account, owner map[string]string, failed error) error {
	// The caller's context may be what ended; the undo gets a little time of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var errs []error
	for _, name := range []string{account.Name, NamespaceCreatorBinding(account)} {
		if b, err := memberKube.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); err == nil && ownedBy(b.Annotations, owner) {
			errs = append(errs, ignoreNotFound(memberKube.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})))
		} else if err != nil {
			errs = append(errs, ignoreNotFound(err))
		}
	}
	if ns, err := memberKube.CoreV1().Namespaces().Get(ctx, account.Namespace, metav1.GetOptions{}); err == nil && ownedBy(ns.Annotations, owner) {
		errs = append(errs, ignoreNotFound(memberKube.CoreV1().Namespaces().Delete(ctx, account.Namespace,
			metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(ns.UID))})))
	} else if err != nil {
		errs = append(errs, ignoreNotFound(err))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w; undoing it failed too (%v): Namespace %s and ClusterRoleBinding %s may be left on the member; unjoin removes them", failed, err, account.Namespace, account.Name)
	}
	return fmt.Errorf("%w; undone: Namespace %s (with the service account and its Role and RoleBinding) and ClusterRoleBindings %s and %s, which this join had made, are removed, so nothing is left",
		failed, account.Namespace, account.Name, NamespaceCreatorBinding(account))
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// removeLegacyAccount deletes what join made for the same Cluster in kube-system in builds of
// main after v0.1.0 (its account, and the Role and RoleBinding of its renewal), if it records
// this Cluster as its owner: its tokens stop working. The ClusterRoleBinding of the same name
// now binds the new account.
func removeLegacyAccount(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, account string, owner map[string]string) error {
	for _, o := range legacyObjects(ctx, memberKube, account) {
		obj, err := o.get()
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("member: reading %s %s/%s that an earlier join made (the new token is stored): %w", o.kind, legacyAccountNamespace, account, err)
		case !ownedBy(obj.GetAnnotations(), owner):
			continue
		}
		if err := o.delete(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("member: deleting %s %s/%s that an earlier join made (the new token is stored): %w", o.kind, legacyAccountNamespace, account, err)
		}
		fmt.Fprintf(out, "member: %s %s/%s, made by an earlier join, deleted\n", o.kind, legacyAccountNamespace, account)
	}
	return nil
}

// memberObject is one object of join's on a member: its kind, and how to read and delete it.
type memberObject struct {
	kind   string
	get    func() (metav1.Object, error)
	delete func() error
}

// legacyObjects are what join made for an account in kube-system in builds of main after
// v0.1.0, in the order to delete them (the account last, so that its tokens work until its
// renewal rights are gone).
func legacyObjects(ctx context.Context, memberKube kubernetes.Interface, account string) []memberObject {
	core, rbac := memberKube.CoreV1(), memberKube.RbacV1()
	ns := legacyAccountNamespace
	return []memberObject{
		{"RoleBinding",
			func() (metav1.Object, error) { return rbac.RoleBindings(ns).Get(ctx, account, metav1.GetOptions{}) },
			func() error { return rbac.RoleBindings(ns).Delete(ctx, account, metav1.DeleteOptions{}) }},
		{"Role",
			func() (metav1.Object, error) { return rbac.Roles(ns).Get(ctx, account, metav1.GetOptions{}) },
			func() error { return rbac.Roles(ns).Delete(ctx, account, metav1.DeleteOptions{}) }},
		{"ServiceAccount",
			func() (metav1.Object, error) { return core.ServiceAccounts(ns).Get(ctx, account, metav1.GetOptions{}) },
			func() error { return core.ServiceAccounts(ns).Delete(ctx, account, metav1.DeleteOptions{}) }},
	}
}
