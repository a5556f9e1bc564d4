package join

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/boundtoken"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/internal/clusterapply"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// DefaultTokenTTL is the life of the tokens Join asks for unless Options.TokenTTL says otherwise:
// hours, not a year, since a rotator renews them (package rotation) and a leaked one is worth
// little for long.
const DefaultTokenTTL = 8 * time.Hour

// MinTokenTTL is the shortest token an API server issues (a TokenRequest's expirationSeconds of
// at least 600): a shorter TokenTTL is refused before anything is made.
const MinTokenTTL = 10 * time.Minute

// DefaultClusterRole is the member's ClusterRole that Join binds the account to unless
// Options.ClusterRole says otherwise: tools may change workloads everywhere, but not RBAC.
const DefaultClusterRole = "edit"

// DefaultFieldManager owns what Join applies unless Options.FieldManager says otherwise: the
// clusterregistry command's, so that the command and a tool joining the same member share
// ownership of its Cluster and Secret.
const DefaultFieldManager = "clusterregistry"

// Options shape a join.
type Options struct {
	// Name is the Cluster's name in the cluster set. Required.
	Name string
	// DisplayName and Labels are the Cluster's.
	DisplayName string
	Labels      map[string]string
	// ClusterRole is the member's ClusterRole that the account is bound to, cluster-wide;
	// DefaultClusterRole when empty. It must exist on the member.
	ClusterRole string
	// AllowNamespaceCreation also binds the account to NamespaceCreatorRole, so that it may
	// create namespaces (and do nothing else with them): what a Release's createNamespace needs.
	// Off, the account gets ClusterRole and nothing more, and a join run again without it takes
	// an earlier join's right away. It goes without Exec.
	AllowNamespaceCreation bool
	// TokenTTL is how long the token is asked to be valid (the member may shorten it);
	// DefaultTokenTTL when zero.
	TokenTTL time.Duration
	// Exec registers the member config's exec plugin (a cloud's, say) as the Cluster's exec
	// provider instead of making an account and a token: each reader then runs the plugin as
	// themselves. Nothing is made on the member, and only the Cluster in the registry.
	Exec bool
	// DropCredentialArgs, with Exec, leaves out the plugin's arguments that pass a credential
	// instead of refusing it (CredentialArgError).
	DropCredentialArgs bool
	// Tunnel, when set, joins a member that the registry cannot dial, through a tunnel whose
	// agent Join makes (TunnelOptions). It goes without Exec.
	Tunnel *TunnelOptions
	// DryRun checks what can be checked (the member answers, the ClusterRole exists, the registry
	// takes the Cluster and Secret, by a server-side dry run) and changes nothing.
	DryRun bool
	// FieldManager owns what Join applies; DefaultFieldManager when empty.
	FieldManager string
	// Progress hears one line for each step, as it is done ("member: ...", "registry: ...",
	// "warning: ...", "note: ..."), never a token; nil discards them.
	Progress io.Writer
}

func (o *Options) defaults() error {
	if errs := validation.IsDNS1123Subdomain(o.Name); len(errs) > 0 {
		return fmt.Errorf("join.Options.Name %q: %s", o.Name, strings.Join(errs, "; "))
	}
	if o.Exec && (o.ClusterRole != "" || o.TokenTTL != 0 || o.AllowNamespaceCreation) {
		return errors.New("join.Options: ClusterRole, TokenTTL and AllowNamespaceCreation go without Exec, which makes no account or token")
	}
	if o.Exec && o.Tunnel != nil {
		return errors.New("join.Options.Tunnel goes without Exec: a tunnelled member is reached with a token of its account, never with readers' own credentials")
	}
	if o.Tunnel != nil {
		if err := o.Tunnel.defaults(o.Name); err != nil {
			return err
		}
	}
	if !o.Exec && o.DropCredentialArgs {
		return errors.New("join.Options.DropCredentialArgs goes with Exec: without it, Join registers a token, not the plugin")
	}
	if o.TokenTTL < 0 {
		return fmt.Errorf("join.Options.TokenTTL %s: want a positive duration", o.TokenTTL)
	}
	if o.TokenTTL != 0 && o.TokenTTL < MinTokenTTL {
		return fmt.Errorf("join.Options.TokenTTL %s: an API server gives no token for less than %s", o.TokenTTL, MinTokenTTL)
	}
	if o.ClusterRole == "" {
		o.ClusterRole = DefaultClusterRole
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	if o.FieldManager == "" {
		o.FieldManager = DefaultFieldManager
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	return nil
}

// Result is what Join made, or for a dry run, would make.
type Result struct {
	// Cluster is the Cluster as the registry has it after the join (for a dry run, as the
	// registry's dry run returned it).
	Cluster *v1alpha1.Cluster
	// ClusterChange says what happened to it: "created", "configured" or "unchanged".
	ClusterChange string
	// Account is what was made on the member, and Secret the registry's Secret that holds its
	// token; both are zero with Options.Exec.
	Account Account
	Secret  types.NamespacedName
	// TokenExpires is when the new token expires, as the member says; zero for a dry run or
	// Options.Exec.
	TokenExpires time.Time
	// Revoked counts the earlier tokens of the account that were revoked.
	Revoked int
	// Exec is what was registered with Options.Exec.
	Exec *ExecRegistration
	// Agent is, with Options.Tunnel, the tunnel agent's objects as applied on the member (or
	// written out), their token left out.
	Agent *agent.Manifests
}

// Join makes the member that member (an administrator's config of it) reaches reachable from the
// registry's cluster set as Cluster opts.Name; see the package's documentation. What the registry
// or the member would refuse is found before anything is made. An error names what was made by
// then ("(nothing was done)" when nothing was); joining again finishes or repairs it, and Unjoin
// removes it.
func Join(ctx context.Context, member *rest.Config, reg Registry, opts Options) (*Result, error) {
	if err := reg.validate(); err != nil {
		return nil, err
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if member == nil || member.Host == "" {
		return nil, errors.New("join: the member's config names no server")
	}
	server := strings.TrimSuffix(member.Host, "/")
	if len(member.CAData) == 0 {
		return nil, errors.New("member: the config's cluster has no certificate-authority-data; join needs the CA to pin and verify the member")
	}
	if opts.Exec {
		return joinExec(ctx, member, server, reg, &opts)
	}
	return joinToken(ctx, member, server, reg, &opts)
}

// joinToken makes an account on the member and registers its token, in order, saying what it
// did as it goes.
func joinToken(ctx context.Context, member *rest.Config, server string, reg Registry, o *Options) (*Result, error) {
	namespace, out := reg.Namespace, o.Progress
	secretName := o.Name + "-token"
	if err := checkNameFree(ctx, out, reg, o.Name, server); err != nil {
		return nil, err
	}
	regID := reg.ID(ctx)
	account, owner := AccountFor(regID, namespace, o.Name), owner(regID, namespace, o.Name)
	if err := checkAgentFree(ctx, reg, o.Tunnel, owner); err != nil {
		return nil, err
	}
	ca := member.CAData
	c, err := tokenCluster(namespace, server, ca, o)
	if err != nil {
		return nil, err
	}
	memberKube, err := kubernetes.NewForConfig(member)
	if err != nil {
		return nil, err
	}
	if err := checkClusterRole(ctx, memberKube, o.ClusterRole, server); err != nil {
		return nil, err
	}
	dry, what, err := dryRunInRegistry(ctx, reg, &c, o.FieldManager, tokenSecret(namespace, secretName, server, "dry-run", ca, o.Tunnel))
	if err != nil {
		return nil, err
	}
	result := &Result{Account: account, Secret: types.NamespacedName{Namespace: namespace, Name: secretName}}
	if o.DryRun {
		result.Agent = sayDryRun(out, reg, o, account, owner, server, what)
		result.Cluster, result.ClusterChange = dry, what
		return result, nil
	}
	// From here, a refusal of the member or the registry undoes the account if this run made it:
	// a join either happens or leaves nothing behind.
	isNew, err := applyAccount(ctx, out, memberKube, account, grants{role: o.ClusterRole, namespaces: o.AllowNamespaceCreation, tunnel: o.Tunnel != nil}, owner, o.FieldManager)
	undo := func(err error) error {
		if !isNew {
			return err
		}
		return undoAccount(ctx, memberKube, account, owner, err)
	}
	if err != nil {
		return nil, undo(err)
	}
	if o.Tunnel != nil {
		if result.Agent, err = joinTunnel(ctx, out, memberKube, reg, o, account, owner); err != nil {
			return nil, undo(err)
		}
	}
	token, err := boundtoken.Issue(ctx, memberKube.CoreV1(), account.Namespace, account.Name, o.TokenTTL)
	if err != nil && isNew {
		return nil, undo(fmt.Errorf("member: %w", err))
	}
	if err != nil {
		return nil, fmt.Errorf("member: %w (the account an earlier join made is left as it was)", err)
	}
	if err := storeToken(ctx, reg, o, server, ca, account, token); err != nil {
		if isNew {
			return nil, undo(fmt.Errorf("registry: storing the token in Secret %s/%s: %w", namespace, secretName, err))
		}
		return nil, fmt.Errorf("registry: storing the token in Secret %s/%s (the account an earlier join made is kept; its token is not replaced): %w", namespace, secretName, err)
	}
	result.TokenExpires = token.ExpirationTimestamp.Time
	fmt.Fprintf(out, "registry: Secret %s/%s applied, pinned to %s, token valid until %s\n", namespace, secretName, server, token.ExpirationTimestamp.Format(time.RFC3339))
	// Joining again replaces the token: the ones it replaces stop working, and what an earlier
	// release made in kube-system goes.
	if result.Revoked, err = revokeReplaced(ctx, out, memberKube, account, token.Token); err != nil {
		return nil, err
	}
	if err := removeLegacyAccount(ctx, out, memberKube, account.Name, owner); err != nil {
		return nil, err
	}
	if result.Cluster, result.ClusterChange, err = clusterapply.Apply(ctx, reg.Clusters, &c, o.FieldManager, false, true); err != nil {
		return nil, fmt.Errorf("registry: applying cluster %s/%s (the member's service account and the Secret are made): %w", namespace, o.Name, err)
	}
	fmt.Fprintf(out, "registry: Cluster %s/%s %s\n", namespace, o.Name, result.ClusterChange)
	return result, nil
}

// tokenCluster is the Cluster of a join with a token: its provider reads Secret NAME-token.
func tokenCluster(namespace, server string, ca []byte, o *Options) (v1alpha1.Cluster, error) {
	c := clusterFor(namespace, server, ca, o, v1alpha1.AuthProviderConfig{
		Name: "token", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret},
		Config: map[string]string{"name": o.Name + "-token"},
	})
	if errs := v1alpha1.ValidateCluster(&c); len(errs) > 0 {
		return c, fmt.Errorf("registry: cluster %s/%s would be invalid (nothing was done): %w", namespace, o.Name, errs.ToAggregate())
	}
	return c, nil
}

// storeToken stores the member's new token in the registry, in Secret NAME-token: pinned to the
// member's server (and agent), naming its account and when it expires.
func storeToken(ctx context.Context, reg Registry, o *Options, server string, ca []byte, account Account, token *authenticationv1.TokenRequestStatus) error {
	secret := tokenSecret(reg.Namespace, o.Name+"-token", server, token.Token, ca, o.Tunnel).WithAnnotations(map[string]string{
		v1alpha1.ServiceAccountAnnotation: account.String(),
		v1alpha1.TokenExpiresAnnotation:   token.ExpirationTimestamp.UTC().Format(time.RFC3339),
	})
	_, err := reg.Kube.CoreV1().Secrets(reg.Namespace).Apply(ctx, secret, metav1.ApplyOptions{FieldManager: o.FieldManager, Force: true})
	return err
}

// checkClusterRole refuses a ClusterRole the member does not have: a binding to a role that does
// not exist grants nothing, silently. Reading it also shows that the member answers, before
// anything is made.
func checkClusterRole(ctx context.Context, memberKube kubernetes.Interface, role, server string) error {
	if _, err := memberKube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return &NoClusterRoleError{ClusterRole: role, Server: server}
	} else if err != nil {
		return fmt.Errorf("member: reaching %s to read ClusterRole %s (nothing was done): %w", server, role, err)
	}
	return nil
}

// dryRunInRegistry finds what the registry would refuse (a cluster set that does not exist, no
// right to write Secrets or Clusters there, an invalid Cluster) before the member is changed: a
// server-side dry run of c and of secret. It returns c as the registry would have it, and whether
// it would be created, configured or left unchanged.
func dryRunInRegistry(ctx context.Context, reg Registry, c *v1alpha1.Cluster, fieldManager string, secret *corev1ac.SecretApplyConfiguration) (*v1alpha1.Cluster, string, error) {
	dry, what, err := clusterapply.Apply(ctx, reg.Clusters, c, fieldManager, true, true)
	if err == nil {
		dryApply := metav1.ApplyOptions{FieldManager: fieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}
		_, err = reg.Kube.CoreV1().Secrets(c.Namespace).Apply(ctx, secret, dryApply)
	}
	if err != nil {
		hint := ""
		if apierrors.IsNotFound(err) {
			hint = fmt.Sprintf("; make the cluster set with: clusterregistry install --create-namespace -n %s", c.Namespace)
		}
		return nil, "", fmt.Errorf("registry: the registry refuses cluster %s/%s or its Secret (nothing was done): %w%s", c.Namespace, c.Name, err, hint)
	}
	return dry, what, nil
}

// sayDryRun says what a join would do, where a dry run stops, and returns the tunnel agent's
// manifests (without a token) when it has one.
func sayDryRun(out io.Writer, reg Registry, o *Options, account Account, owner map[string]string, server, clusterChange string) *agent.Manifests {
	secret := types.NamespacedName{Namespace: reg.Namespace, Name: o.Name + "-token"}
	fmt.Fprintf(out, "member: would apply Namespace %s and ServiceAccount %s, and bind it to ClusterRole %s (dry run)\n", account.Namespace, account, o.ClusterRole)
	if o.AllowNamespaceCreation {
		fmt.Fprintf(out, "member: would bind %s to ClusterRole %s: it may create namespaces (dry run)\n", account, NamespaceCreatorRole)
	}
	fmt.Fprintf(out, "member: would apply Role and RoleBinding %s: the account may renew its own token, nothing else (dry run)\n", account)
	fmt.Fprintf(out, "member: would ask for a token of %s valid %s, and revoke the ones it replaces (dry run)\n", account, o.TokenTTL)
	fmt.Fprintf(out, "registry: would apply Secret %s with a new token, pinned to %s (dry run)\n", secret, server)
	fmt.Fprintf(out, "registry: Cluster %s/%s would be %s (server dry run)\n", secret.Namespace, o.Name, clusterChange)
	if o.Tunnel == nil {
		return nil
	}
	return sayTunnelDryRun(out, reg, o, account, owner)
}

// revokeReplaced revokes the account's tokens other than keep, and says how many it revoked.
func revokeReplaced(ctx context.Context, out io.Writer, memberKube kubernetes.Interface, account Account, keep string) (int, error) {
	revoked, err := boundtoken.Revoke(ctx, memberKube.CoreV1(), account.Namespace, account.Name, keep)
	if err != nil {
		return 0, fmt.Errorf("member: %w (the new token is stored; join again to retry)", err)
	}
	if revoked > 0 {
		fmt.Fprintf(out, "member: %d replaced token(s) revoked\n", revoked)
	}
	return revoked, nil
}

// tokenSecret is the Secret Join stores a member's token in: pinned to the member's server (and
// to its tunnel agent, with one), with the member's CA.
func tokenSecret(namespace, name, server, token string, ca []byte, t *TunnelOptions) *corev1ac.SecretApplyConfiguration {
	pins := map[string]string{v1alpha1.ServersAnnotation: server}
	if t != nil {
		pins[v1alpha1.TunnelAgentAnnotation] = t.Agent
	}
	return corev1ac.Secret(name, namespace).
		WithAnnotations(pins).
		WithType(corev1.SecretTypeOpaque).
		WithData(map[string][]byte{v1alpha1.SecretTokenKey: []byte(token), v1alpha1.SecretCAKey: ca})
}

// checkNameFree refuses a name taken by a Cluster for another server: it is not this member's
// to overwrite. Other Clusters of the set for the same server are named in a warning: a fan-out
// would reach that member once for each.
func checkNameFree(ctx context.Context, out io.Writer, reg Registry, name, server string) error {
	namespace := reg.Namespace
	list, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("reading the Clusters of %s in the registry (nothing was done): %w", namespace, err)
	}
	var same []string
	for _, c := range list.Items {
		eps := c.Spec.KubernetesAPIEndpoints.ServerEndpoints
		forServer := len(eps) > 0 && strings.TrimSuffix(eps[0].ServerAddress, "/") == server
		switch {
		case c.Name == name && !forServer:
			return &NameTakenError{Namespace: namespace, Name: name}
		case c.Name != name && forServer:
			same = append(same, c.Name)
		}
	}
	if len(same) > 0 {
		fmt.Fprintf(out, "warning: %s is already in %s as %s: a fan-out over the set reaches it once for each\n", server, namespace, strings.Join(same, ", "))
	}
	return nil
}

// clusterFor is the Cluster Join applies: the member at server, verified by ca, reached with
// provider, and the name, labels and display name of the options, and its shard bucket unless the
// labels name one (so that a shard group's bucket views watch it only where it is owned).
func clusterFor(namespace, server string, ca []byte, o *Options, provider v1alpha1.AuthProviderConfig) v1alpha1.Cluster {
	c := v1alpha1.Cluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: namespace, Labels: maps.Clone(o.Labels)},
		Spec: v1alpha1.ClusterSpec{
			DisplayName: o.DisplayName,
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}},
				CABundle:        ca,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{provider}},
		},
	}
	if o.Tunnel != nil {
		c.Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{Agent: o.Tunnel.Agent}
	}
	shard.SetBucket(&c)
	return c
}
