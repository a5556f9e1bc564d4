package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/rotation"
)

// legacyJoinNamespace held, on each member, the service accounts that join made (v0.1.0, and
// builds of main after it until accounts had namespaces of their own). Now each account has a
// namespace of its own (memberNamespace), where it may make the Secrets its tokens are bound to
// (package rotation); in kube-system that would be unsafe.
const legacyJoinNamespace = "kube-system"

// defaultTokenTTL is the life of the tokens join asks for: hours, not a year, since a rotator
// renews them (health --rotate-credentials) and a leaked one is worth little for long.
const defaultTokenTTL = 8 * time.Hour

type joinOptions struct {
	name, displayName, clusterRole string
	labels                         map[string]string
	tokenTTL                       time.Duration
	exec, dryRun                   bool
	dropCredentialArgs             bool
}

// JoinOptions are join's flags and what Complete makes of them: Complete fills in, Validate
// checks without servers, Run does the work.
type JoinOptions struct {
	joinOptions // what join and joinExec read
	Labels      string
	DryRun      *dryRunFlag
	Output      appliedOutput

	context string
	factory *factory
	cmd     *cobra.Command
}

// Complete takes the context, parses the labels and the dry-run strategy, and names the Cluster
// after the context unless --name does.
func (o *JoinOptions) Complete(f *factory, cmd *cobra.Command, args []string) error {
	o.context, o.factory, o.cmd = args[0], f, cmd
	var err error
	if o.labels, err = labels.ConvertSelectorToLabelsMap(o.Labels); err != nil {
		return usageError{fmt.Errorf("--labels: %w", err)}
	}
	if o.dryRun, err = o.DryRun.enabled(); err != nil {
		return err
	}
	if o.name == "" {
		o.name = o.context
	}
	return nil
}

// Validate refuses flags that do not go together, before anything is reached.
func (o *JoinOptions) Validate() error {
	if err := o.Output.validate(); err != nil {
		return err
	}
	if o.exec {
		for _, name := range []string{"cluster-role", "token-ttl"} {
			if o.cmd.Flags().Changed(name) {
				return usageError{fmt.Errorf("--%s and --exec conflict: --exec makes no service account or token", name)}
			}
		}
	} else if o.dropCredentialArgs {
		return usageError{fmt.Errorf("--%s goes with --exec: without it, join registers a token, not the context's plugin", dropCredentialArgsFlag)}
	}
	if o.tokenTTL <= 0 {
		return usageError{fmt.Errorf("--token-ttl %s: want a positive duration", o.tokenTTL)}
	}
	return nil
}

// Run joins the member, saying what it does as it goes.
func (o *JoinOptions) Run(ctx context.Context) error {
	member, server, err := o.factory.Member(o.context)
	if err != nil {
		return err
	}
	reg, err := o.factory.Registry()
	if err != nil {
		return err
	}
	report := o.Output.report(o.cmd)
	var applied *v1alpha1.Cluster
	if o.exec {
		applied, err = joinExec(ctx, report, reg, o.context, member, server, o.joinOptions)
	} else {
		applied, err = join(ctx, report, reg, member, server, o.joinOptions)
	}
	if err != nil {
		return err
	}
	if !o.dryRun {
		fmt.Fprintf(report, "next: clusterregistry health -n %s probes the members and fills READY and VERSION in kubectl get clusters -n %s\n", reg.Namespace, reg.Namespace)
		if !o.exec {
			fmt.Fprintf(report, "next: clusterregistry health -n %s --rotate-credentials renews the token before it expires (or join again)\n", reg.Namespace)
		}
	}
	return o.Output.print(o.cmd.OutOrStdout(), []*v1alpha1.Cluster{applied})
}

var (
	joinLong = `join registers the cluster of one of your kubeconfig's contexts (the member) in the registry
(the -n namespace, a cluster set). On the member, with the context's credentials, it makes a
namespace and in it a service account of their own, clusterregistry-<set>-<name>-<digest>, binds
the account to --cluster-role (default edit, bound cluster-wide: tools may change workloads
everywhere but not RBAC; choose view to only read, or cluster-admin), lets it ask for tokens of
itself and make the Secrets of its namespace that they are bound to, and nothing else (so that a
rotator, such as clusterregistry health --rotate-credentials, renews the token with the token, and
revokes the one it replaces), and asks for a token for it, valid --token-ttl. In the registry it stores the token and the
member's CA in a Secret pinned to the member's server, and applies the Cluster: the endpoint,
caBundle, a secret provider, labels and display name.

With --exec it copies no token: for a context whose user runs an exec plugin (a cloud's, such as
aws eks get-token or gke-gcloud-auth-plugin), it checks that the plugin reaches the member and
registers the plugin's command and args as the Cluster's exec provider, so that each reader runs
it with their own cloud identity. Readers must allow the command with its arguments
(--allow-exec-args; join prints the flag) and the server (--send-to). The plugin's environment is
not copied, as it may hold secrets; nor is an argument that passes a credential (such as
--oidc-client-secret=...): join refuses such a plugin, or with --drop-credential-args registers it
without the argument. To switch a member between a token and --exec, unjoin it first.

Run again, it updates what it made rather than duplicating it, with a fresh token, and revokes
the tokens it replaces (and removes the account an earlier release made in kube-system). It refuses a
name already taken by a Cluster for another server. unjoin removes what join made, on both sides.
With --dry-run it checks the context, the name, the member's ClusterRole and the Cluster (by a
server-side dry run) and says what it would do, changing nothing. With -o it prints the Cluster
as the registry returned it (yaml, json or name), and the report goes to stderr.`

	joinExample = `  # Register the kind-dev context as "dev", labelled env=dev, in the fleet cluster set
  clusterregistry join kind-dev --name dev --labels env=dev -n fleet

  # Read-only access for the registry's tools
  clusterregistry join prod-eu-1 --cluster-role view -n fleet

  # A cloud cluster: each reader authenticates with the context's plugin, as themselves
  clusterregistry join gke_acme_europe-west1_prod --name prod-eu-2 --exec -n fleet`
)

func newJoin(fac *factory) *cobra.Command {
	o := &JoinOptions{}
	cmd := &cobra.Command{
		Use:     "join CONTEXT [--name NAME] [--labels k=v,...] [--cluster-role ROLE] [-o yaml|json|name|jsonpath=...]",
		Short:   "Register a cluster of your kubeconfig in the registry",
		Long:    joinLong,
		Example: joinExample,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(1)(cmd, args); err != nil {
				return usageError{fmt.Errorf("%w: the kubeconfig context of the cluster to join", err)}
			}
			return nil
		},
		RunE: runOptions(fac, o),
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "the Cluster's name in the registry (default: the context's name)")
	f.StringVar(&o.displayName, "display-name", "", "the Cluster's display name")
	f.StringVar(&o.Labels, "labels", "", "labels for the Cluster, e.g. env=prod,region=eu")
	f.StringVar(&o.clusterRole, "cluster-role", "edit", "the member's ClusterRole that the registry's tools act with")
	f.DurationVar(&o.tokenTTL, "token-ttl", defaultTokenTTL, "how long the token is valid (the member may cap it); health --rotate-credentials renews it before it expires, or join again")
	f.BoolVar(&o.exec, "exec", false, "register the context's exec plugin instead of a token (cloud clusters)")
	f.BoolVar(&o.dropCredentialArgs, dropCredentialArgsFlag, false, "with --exec: leave out the plugin's arguments that pass a credential (--client-secret=..., --password ...) instead of refusing to register it")
	o.DryRun = addDryRunFlag(cmd, "client", "checks what it can (the registry by a server dry run) and says what it would do, changing nothing", nil)
	o.Output.addFlag(cmd)
	return cmd
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// join does the work in order, saying what it did as it goes.
func join(ctx context.Context, out io.Writer, reg *registry, member *rest.Config, server string, o joinOptions) (*v1alpha1.Cluster, error) {
	namespace, registryKube := reg.Namespace, reg.Kube
	secretName := o.name + "-token"
	if err := checkNameFree(ctx, out, reg, o.name, server); err != nil {
		return nil, err
	}

	ca := member.CAData
	if len(ca) == 0 {
		return nil, errors.New("member: the context's cluster has no certificate-authority-data; join needs the CA to pin and verify the member")
	}

	c := joinedCluster(namespace, server, ca, o, v1alpha1.AuthProviderConfig{
		Name: "token", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret},
		Config: map[string]string{"name": secretName},
	})
	if errs := v1alpha1.ValidateCluster(&c); len(errs) > 0 {
		return nil, fmt.Errorf("registry: cluster %s/%s would be invalid (nothing was done): %w", namespace, o.name, errs.ToAggregate())
	}
	memberKube, err := kubernetes.NewForConfig(member)
	if err != nil {
		return nil, err
	}
	// A binding to a role that does not exist grants nothing, silently; reading the role also
	// shows that the member answers, before anything is made.
	if _, err := memberKube.RbacV1().ClusterRoles().Get(ctx, o.clusterRole, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return nil, usageError{fmt.Errorf("member: ClusterRole %q does not exist on %s (nothing was done); choose one that does (kubectl get clusterroles)", o.clusterRole, server)}
	} else if err != nil {
		return nil, fmt.Errorf("member: reaching %s to read ClusterRole %s (nothing was done): %w", server, o.clusterRole, err)
	}
	// What the registry would refuse (a cluster set that does not exist, no right to write
	// Secrets or Clusters there, an invalid Cluster) is found before the member is changed.
	regID := registryID(ctx, registryKube, reg.Config)
	account := memberAccount(regID, namespace, o.name)
	owner := ownerAnnotations(regID, namespace, o.name)
	dry, what, err := applyCluster(ctx, reg.Clusters, &c, true, true)
	if err == nil {
		dryApply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}
		_, err = registryKube.CoreV1().Secrets(namespace).Apply(ctx, tokenSecret(namespace, secretName, server, "dry-run", ca), dryApply)
	}
	if err != nil {
		hint := ""
		if apierrors.IsNotFound(err) {
			hint = fmt.Sprintf("; make the cluster set with: clusterregistry install --create-namespace -n %s", namespace)
		}
		return nil, fmt.Errorf("registry: the registry refuses cluster %s/%s or its Secret (nothing was done): %w%s", namespace, o.name, err, hint)
	}
	saNamespace := memberNamespace(account)
	if o.dryRun {
		fmt.Fprintf(out, "member: would apply Namespace %s and ServiceAccount %s/%s, and bind it to ClusterRole %s (dry run)\n", saNamespace, saNamespace, account, o.clusterRole)
		fmt.Fprintf(out, "registry: would apply Secret %s/%s with a new token, pinned to %s (dry run)\n", namespace, secretName, server)
		fmt.Fprintf(out, "registry: Cluster %s/%s would be %s (server dry run)\n", namespace, o.name, what)
		return dry, nil
	}
	if err := applyMemberAccount(ctx, out, memberKube, saNamespace, account, o.clusterRole, owner); err != nil {
		return nil, err
	}
	token, err := rotation.Issue(ctx, memberKube.CoreV1(), saNamespace, account, o.tokenTTL)
	if err != nil {
		return nil, fmt.Errorf("member: %w (its service account and bindings are made; unjoin removes them)", err)
	}
	secret := tokenSecret(namespace, secretName, server, token.Token, ca).WithAnnotations(map[string]string{
		v1alpha1.ServiceAccountAnnotation: saNamespace + "/" + account,
		v1alpha1.TokenExpiresAnnotation:   token.ExpirationTimestamp.UTC().Format(time.RFC3339),
	})
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if _, err := registryKube.CoreV1().Secrets(namespace).Apply(ctx, secret, apply); err != nil {
		return nil, fmt.Errorf("registry: storing the token in Secret %s/%s (the member's service account is made; unjoin removes it): %w", namespace, secretName, err)
	}
	fmt.Fprintf(out, "registry: Secret %s/%s applied, pinned to %s, token valid until %s\n", namespace, secretName, server, token.ExpirationTimestamp.Format(time.RFC3339))
	// Joining again replaces the token: the ones it replaces stop working, and what an earlier
	// release made in kube-system goes.
	revoked, err := rotation.Revoke(ctx, memberKube.CoreV1(), saNamespace, account, token.Token)
	if err != nil {
		return nil, fmt.Errorf("member: %w (the new token is stored; join again to retry)", err)
	}
	if revoked > 0 {
		fmt.Fprintf(out, "member: %d replaced token(s) revoked\n", revoked)
	}
	if err := removeLegacyAccount(ctx, out, memberKube, account, owner); err != nil {
		return nil, err
	}

	applied, what, err := applyCluster(ctx, reg.Clusters, &c, false, true)
	if err != nil {
		return nil, fmt.Errorf("registry: applying cluster %s/%s (the member's service account and the Secret are made): %w", namespace, o.name, err)
	}
	fmt.Fprintf(out, "registry: Cluster %s/%s %s\n", namespace, o.name, what)
	return applied, nil
}

// applyMemberAccount makes, on the member, the account's namespace, the account, its binding to
// the ClusterRole, and its right to renew its own tokens (rotation.Rules), all owner-annotated.
func applyMemberAccount(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, saNamespace, account, clusterRole string, owner map[string]string) error {
	switch ns, err := memberKube.CoreV1().Namespaces().Get(ctx, saNamespace, metav1.GetOptions{}); {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("member: reading Namespace %s (nothing was done): %w", saNamespace, err)
	case !sameOwner(ns.Annotations, owner):
		return fmt.Errorf("member: Namespace %s exists and is not this Cluster's (it does not record it as its owner); nothing was done", saNamespace)
	case ns.DeletionTimestamp != nil:
		return fmt.Errorf("member: Namespace %s is being deleted (an unjoin); nothing was done: join again once it is gone", saNamespace)
	}
	apply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true}
	if _, err := memberKube.CoreV1().Namespaces().Apply(ctx, corev1ac.Namespace(saNamespace).WithAnnotations(owner), apply); err != nil {
		return fmt.Errorf("member: creating Namespace %s (nothing was done): %w", saNamespace, err)
	}
	sa := corev1ac.ServiceAccount(account, saNamespace).WithAnnotations(owner)
	if _, err := memberKube.CoreV1().ServiceAccounts(saNamespace).Apply(ctx, sa, apply); err != nil {
		return fmt.Errorf("member: creating service account %s/%s (its namespace is made; unjoin removes it): %w", saNamespace, account, err)
	}
	fmt.Fprintf(out, "member: Namespace %s and ServiceAccount %s/%s applied\n", saNamespace, saNamespace, account)
	binding := rbacv1ac.ClusterRoleBinding(account).WithAnnotations(owner).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(clusterRole)).
		WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithNamespace(saNamespace).WithName(account))
	if _, err := memberKube.RbacV1().ClusterRoleBindings().Apply(ctx, binding, apply); err != nil {
		return fmt.Errorf("member: binding %s to ClusterRole %s (the service account is made; unjoin removes it): %w", account, clusterRole, err)
	}
	fmt.Fprintf(out, "member: ClusterRoleBinding %s to ClusterRole %s applied\n", account, clusterRole)
	// The account may renew its own token, bound to a Secret of its namespace, and nothing else:
	// a rotator renews the token with the token (package rotation).
	var rules []*rbacv1ac.PolicyRuleApplyConfiguration
	for _, r := range rotation.Rules(account) {
		rules = append(rules, rbacv1ac.PolicyRule().WithAPIGroups(r.APIGroups...).WithResources(r.Resources...).WithVerbs(r.Verbs...).WithResourceNames(r.ResourceNames...))
	}
	if _, err := memberKube.RbacV1().Roles(saNamespace).Apply(ctx, rbacv1ac.Role(account, saNamespace).WithAnnotations(owner).WithRules(rules...), apply); err != nil {
		return fmt.Errorf("member: granting %s the renewal of its own token (its service account and binding are made; unjoin removes them): %w", account, err)
	}
	renewBinding := rbacv1ac.RoleBinding(account, saNamespace).WithAnnotations(owner).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("Role").WithName(account)).
		WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithNamespace(saNamespace).WithName(account))
	if _, err := memberKube.RbacV1().RoleBindings(saNamespace).Apply(ctx, renewBinding, apply); err != nil {
		return fmt.Errorf("member: binding %s to the renewal of its own token (its service account and binding are made; unjoin removes them): %w", account, err)
	}
	fmt.Fprintf(out, "member: Role and RoleBinding %s/%s applied: the account may renew its own token, nothing else\n", saNamespace, account)
	return nil
}

// removeLegacyAccount deletes what join made for the same Cluster in kube-system in builds of
// main after v0.1.0 (its account, and the Role and RoleBinding of its renewal), if it records
// this Cluster as its owner:
// its tokens stop working. The ClusterRoleBinding of the same name now binds the new account.
func removeLegacyAccount(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, account string, owner map[string]string) error {
	core, rbac := memberKube.CoreV1(), memberKube.RbacV1()
	for _, o := range []struct {
		kind   string
		get    func() (metav1.Object, error)
		delete func() error
	}{
		{"RoleBinding", func() (metav1.Object, error) {
			return rbac.RoleBindings(legacyJoinNamespace).Get(ctx, account, metav1.GetOptions{})
		},
			func() error {
				return rbac.RoleBindings(legacyJoinNamespace).Delete(ctx, account, metav1.DeleteOptions{})
			}},
		{"Role", func() (metav1.Object, error) {
			return rbac.Roles(legacyJoinNamespace).Get(ctx, account, metav1.GetOptions{})
		},
			func() error { return rbac.Roles(legacyJoinNamespace).Delete(ctx, account, metav1.DeleteOptions{}) }},
		{"ServiceAccount", func() (metav1.Object, error) {
			return core.ServiceAccounts(legacyJoinNamespace).Get(ctx, account, metav1.GetOptions{})
		},
			func() error {
				return core.ServiceAccounts(legacyJoinNamespace).Delete(ctx, account, metav1.DeleteOptions{})
			}},
	} {
		obj, err := o.get()
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("member: reading %s %s/%s that an earlier join made (the new token is stored): %w", o.kind, legacyJoinNamespace, account, err)
		case !sameOwner(obj.GetAnnotations(), owner):
			continue
		}
		if err := o.delete(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("member: deleting %s %s/%s that an earlier join made (the new token is stored): %w", o.kind, legacyJoinNamespace, account, err)
		}
		fmt.Fprintf(out, "member: %s %s/%s, made by an earlier join, deleted\n", o.kind, legacyJoinNamespace, account)
	}
	return nil
}

// tokenSecret is the Secret join stores a member's token in: pinned to the member's server, with
// the member's CA.
func tokenSecret(namespace, name, server, token string, ca []byte) *corev1ac.SecretApplyConfiguration {
	return corev1ac.Secret(name, namespace).
		WithAnnotations(map[string]string{v1alpha1.ServersAnnotation: server}).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{"token": []byte(token), "ca.crt": ca})
}

// checkNameFree refuses a name taken by a Cluster for another server: it is not this member's
// to overwrite. Other Clusters of the set for the same server are named in a warning: a fan-out
// would reach that member once for each.
func checkNameFree(ctx context.Context, out io.Writer, reg *registry, name, server string) error {
	namespace := reg.Namespace
	clusters := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace)
	list, err := clusters.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("reading the Clusters of %s in the registry (nothing was done): %w", namespace, err)
	}
	var same []string
	for _, c := range list.Items {
		eps := c.Spec.KubernetesAPIEndpoints.ServerEndpoints
		forServer := len(eps) > 0 && strings.TrimSuffix(eps[0].ServerAddress, "/") == server
		switch {
		case c.Name == name && !forServer:
			return fmt.Errorf("cluster %s/%s already exists for another server; choose another --name, or unjoin it first", namespace, name)
		case c.Name != name && forServer:
			same = append(same, c.Name)
		}
	}
	if len(same) > 0 {
		fmt.Fprintf(out, "warning: %s is already in %s as %s: a fan-out over the set reaches it once for each\n", server, namespace, strings.Join(same, ", "))
	}
	return nil
}

// joinedCluster is the Cluster join applies: the member at server, verified by ca, reached with
// provider, and the name, labels and display name the user gave.
func joinedCluster(namespace, server string, ca []byte, o joinOptions, provider v1alpha1.AuthProviderConfig) v1alpha1.Cluster {
	return v1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: o.name, Namespace: namespace, Labels: o.labels},
		Spec: v1alpha1.ClusterSpec{
			DisplayName: o.displayName,
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}},
				CABundle:        ca,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{provider}},
		},
	}
}
