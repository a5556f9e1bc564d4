package join_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/boundtoken"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// resolve reaches the member as a tool of the set would: through the registry's Cluster and the
// Secret it points to.
func resolve(t *testing.T, reg join.Registry, name string) (*access.Resolved, error) {
	t.Helper()
	c, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)
	r, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(reg.Kube)})
	require.NoError(t, err)
	return r.Resolve(t.Context(), c)
}

// A tool joins a member as a library, reaches it through the registry with what Join made, joins
// it again (a fresh token; the old one revoked), and unjoins it: nothing is left on either side.
func TestJoinAndUnjoin(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	reg := newSet(t)
	var progress bytes.Buffer
	res, err := join.Join(ctx, lf.Members[0].Config, reg, join.Options{
		Name: "dev", DisplayName: "Development", Labels: map[string]string{"env": "dev"}, ClusterRole: "view", Progress: &progress,
	})
	require.NoError(t, err, progress.String())
	require.Equal(t, "created", res.ClusterChange)
	require.Equal(t, "Development", res.Cluster.Spec.DisplayName)
	// Its bucket too, so that a shard group's bucket views watch it where it is owned.
	require.Equal(t, map[string]string{"env": "dev", shard.BucketLabel: shard.BucketOf(reg.Namespace, "dev")}, res.Cluster.Labels)
	require.Equal(t, lf.Members[0].URL(), res.Cluster.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress)
	require.Equal(t, join.AccountFor(reg.ID(ctx), reg.Namespace, "dev"), res.Account)
	require.WithinDuration(t, time.Now().Add(join.DefaultTokenTTL), res.TokenExpires, 5*time.Minute)
	require.Contains(t, progress.String(), "registry: Cluster "+reg.Namespace+"/dev created\n")

	// On the member: the account, in a namespace of its own, bound as asked, and each object
	// records whose it is.
	member := memberKube()
	sa, err := member.CoreV1().ServiceAccounts(res.Account.Namespace).Get(ctx, res.Account.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, reg.Namespace+"/dev", sa.Annotations[join.ClusterAnnotation])
	require.Equal(t, reg.ID(ctx), sa.Annotations[join.RegistryAnnotation])
	binding, err := member.RbacV1().ClusterRoleBindings().Get(ctx, res.Account.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "view", binding.RoleRef.Name)
	for _, get := range []func() (metav1.Object, error){
		func() (metav1.Object, error) {
			return member.RbacV1().Roles(res.Account.Namespace).Get(ctx, res.Account.Name, metav1.GetOptions{})
		},
		func() (metav1.Object, error) {
			return member.RbacV1().RoleBindings(res.Account.Namespace).Get(ctx, res.Account.Name, metav1.GetOptions{})
		},
		func() (metav1.Object, error) {
			return member.CoreV1().Namespaces().Get(ctx, res.Account.Namespace, metav1.GetOptions{})
		},
	} {
		obj, err := get()
		require.NoError(t, err)
		require.Equal(t, reg.Namespace+"/dev", obj.GetAnnotations()[join.ClusterAnnotation])
	}

	// In the registry: the token, pinned to the member, never in what Join said; a tool of the
	// set reaches the member with it.
	secret, err := reg.Kube.CoreV1().Secrets(reg.Namespace).Get(ctx, res.Secret.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, lf.Members[0].URL(), secret.Annotations[v1alpha1.ServersAnnotation])
	require.Equal(t, res.Account.String(), secret.Annotations[v1alpha1.ServiceAccountAnnotation])
	token := string(secret.Data[v1alpha1.SecretTokenKey])
	require.NotEmpty(t, token)
	require.NotContains(t, progress.String(), token)
	members := multicluster.MembersOf(mustResolver(t, reg), []v1alpha1.Cluster{*res.Cluster}, multicluster.FleetOptions{})
	kube, err := members[0].Kubernetes(ctx)
	require.NoError(t, err)
	_, err = kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the joined account cannot view the member")
	// Joined as view, without AllowNamespaceCreation, it may not create a namespace: join grants
	// exactly the role asked for.
	made := "joined-" + reg.Namespace
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: made}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "a view join's account may create a namespace: %v", err)
	_, err = member.RbacV1().ClusterRoleBindings().Get(ctx, join.NamespaceCreatorBinding(res.Account), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a view join bound its account to the namespace creator: %v", err)

	rejoinAndUnjoin(t, reg, res, member, token, &progress)
}

// rejoinAndUnjoin: joining again changes nothing in the registry but the token, and revokes the
// one it replaced; unjoin leaves nothing on either side, and the current token stops working.
func rejoinAndUnjoin(t *testing.T, reg join.Registry, res *join.Result, member kubernetes.Interface, token string, progress *bytes.Buffer) {
	ctx := t.Context()
	// Joining again changes nothing in the registry but the token, and revokes the one it replaces;
	// asked to, it grants the creation of namespaces too (and not their deletion).
	again, err := join.Join(ctx, lf.Members[0].Config, reg, join.Options{
		Name: "dev", DisplayName: "Development", Labels: map[string]string{"env": "dev"}, ClusterRole: "view", AllowNamespaceCreation: true,
	})
	require.NoError(t, err)
	require.Equal(t, "unchanged", again.ClusterChange)
	require.Equal(t, 1, again.Revoked)
	requireCreatesNamespaces(t, reg, member)
	replaced := token // checked below, with the current one: each check waits out the member's 10 s memory

	// Unjoin: the member's side first, then the registry's; nothing is left, and the current
	// token stops working.
	secret, err := reg.Kube.CoreV1().Secrets(reg.Namespace).Get(ctx, res.Secret.Name, metav1.GetOptions{})
	require.NoError(t, err)
	progress.Reset()
	removed, err := join.Unjoin(ctx, reg, "dev", join.UnjoinOptions{Member: lf.Members[0].Config, Progress: progress})
	require.NoError(t, err)
	require.Len(t, removed.Deleted, 6, progress.String())
	require.Empty(t, removed.LeftInPlace)
	_, err = member.CoreV1().ServiceAccounts(res.Account.Namespace).Get(ctx, res.Account.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the account is left on the member: %v", err)
	_, err = member.RbacV1().ClusterRoleBindings().Get(ctx, res.Account.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the binding is left on the member: %v", err)
	_, err = member.RbacV1().ClusterRoleBindings().Get(ctx, join.NamespaceCreatorBinding(res.Account), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the namespace creator's binding is left on the member: %v", err)
	_, err = reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).Get(ctx, "dev", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Cluster is left: %v", err)
	_, err = reg.Kube.CoreV1().Secrets(reg.Namespace).Get(ctx, res.Secret.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Secret is left: %v", err)
	requireRefused(t, replaced, string(secret.Data[v1alpha1.SecretTokenKey]))

	// Again: nothing to remove is not an error.
	removed, err = join.Unjoin(ctx, reg, "dev", join.UnjoinOptions{Member: lf.Members[0].Config})
	require.NoError(t, err)
	require.Empty(t, removed.Deleted)
	require.Len(t, removed.NotFound, 6)
}

func mustResolver(t *testing.T, reg join.Registry) *access.Resolver {
	t.Helper()
	r, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(reg.Kube)})
	require.NoError(t, err)
	return r
}

// requireRefused fails unless the member refuses token, within the time its API server takes to
// see a binding or account deleted (it remembers a token it accepted for 10 seconds).
func requireRefused(t *testing.T, tokens ...string) {
	t.Helper()
	for _, token := range tokens {
		cfg := *lf.Members[0].Config
		cfg.BearerToken, cfg.CertData, cfg.KeyData = token, nil, nil
		kube := kubernetes.NewForConfigOrDie(&cfg)
		require.Eventually(t, func() bool {
			_, err := kube.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{})
			return apierrors.IsUnauthorized(err)
		}, 30*time.Second, 500*time.Millisecond, "the member still takes a replaced token")
	}
}

// A dry run checks the member and the registry and changes neither; what either would refuse
// is refused before anything is made, with an error that says so.
func TestJoinChangesNothingUntilAllIsChecked(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	reg := newSet(t)
	account := join.AccountFor(reg.ID(ctx), reg.Namespace, "dev")
	member := memberKube()
	requireNothingMade := func() {
		t.Helper()
		_, err := member.CoreV1().Namespaces().Get(ctx, account.Namespace, metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a namespace was made on the member: %v", err)
		_, err = reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).Get(ctx, "dev", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a Cluster was made: %v", err)
		_, err = reg.Kube.CoreV1().Secrets(reg.Namespace).Get(ctx, "dev-token", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "a Secret was made: %v", err)
	}

	var progress bytes.Buffer
	res, err := join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "dev", DryRun: true, Progress: &progress})
	require.NoError(t, err)
	require.Equal(t, "created", res.ClusterChange)
	require.Equal(t, "dev", res.Cluster.Name)
	for _, what := range []string{"Namespace", "ServiceAccount", "ClusterRole", "Role and RoleBinding", "a token", "Secret", "Cluster"} {
		require.Contains(t, progress.String(), what, "a dry run that does not say all it would do")
	}
	requireNothingMade()

	_, err = join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "dev", ClusterRole: "no-such-role"})
	var noRole *join.NoClusterRoleError
	require.ErrorAs(t, err, &noRole)
	require.Contains(t, err.Error(), "(nothing was done)")
	requireNothingMade()

	missing := reg
	missing.Namespace = "no-such-set"
	_, err = join.Join(ctx, lf.Members[0].Config, missing, join.Options{Name: "dev"})
	require.ErrorContains(t, err, "(nothing was done)")
	require.True(t, apierrors.IsNotFound(errors.Unwrap(err)) || strings.Contains(err.Error(), "not found"), "%v", err)
	_, err = member.CoreV1().Namespaces().Get(ctx, join.AccountFor(reg.ID(ctx), "no-such-set", "dev").Namespace, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a join into a missing cluster set made a namespace on the member: %v", err)

	for _, bad := range []join.Options{
		{Name: ""},
		{Name: "Not_A_Name"},
		{Name: "dev", TokenTTL: -time.Minute},
		{Name: "dev", TokenTTL: time.Minute}, // below what an API server issues
		{Name: "dev", Exec: true, ClusterRole: "view"},
		{Name: "dev", DropCredentialArgs: true},
	} {
		_, err := join.Join(ctx, lf.Members[0].Config, reg, bad)
		require.ErrorContains(t, err, "join.Options", "%+v", bad)
	}
	_, err = join.Join(ctx, lf.Members[0].Config, join.Registry{Namespace: reg.Namespace}, join.Options{Name: "dev"})
	require.ErrorContains(t, err, "join.Registry")
	requireNothingMade()
}

// A member that refuses a later step (here the token request: the joining user may make accounts
// and bindings but not ask for tokens) leaves nothing behind: what this join had made is undone,
// and the error says so. Before, the namespace, account and bindings stayed, half a join.
func TestJoinUndoesWhatItMadeWhenTheMemberRefusesLater(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	reg := newSet(t)
	admin := memberKube()
	_, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "joiner-without-tokens"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "serviceaccounts", "secrets"}, Verbs: []string{"*"}}, // not serviceaccounts/token
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, client.IgnoreAlreadyExists(err))
	_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "joiner-without-tokens"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "joiner-without-tokens"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "joiner"}},
	}, metav1.CreateOptions{})
	require.NoError(t, client.IgnoreAlreadyExists(err))
	kubeconfig, err := lf.Members[0].AddUser("joiner")
	require.NoError(t, err)
	joiner, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	require.NoError(t, err)

	_, err = join.Join(ctx, joiner, reg, join.Options{Name: "dev"})
	require.Error(t, err)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.ErrorContains(t, err, "undone")
	account := join.AccountFor(reg.ID(ctx), reg.Namespace, "dev")
	// (A local fleet runs no namespace controller: a deleted namespace stays Terminating.)
	ns, err := admin.CoreV1().Namespaces().Get(ctx, account.Namespace, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err) || (err == nil && ns.DeletionTimestamp != nil), "the namespace this join made is left: %v", err)
	_, err = admin.RbacV1().ClusterRoleBindings().Get(ctx, account.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the ClusterRoleBinding this join made is left: %v", err)
	_, err = reg.Kube.CoreV1().Secrets(reg.Namespace).Get(ctx, "dev-token", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a Secret was made: %v", err)

	// An account an earlier join made is not undone when a rejoin is refused: its token is in use.
	_, err = join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "dev2"})
	require.NoError(t, err)
	_, err = join.Join(ctx, joiner, reg, join.Options{Name: "dev2"})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.NotContains(t, err.Error(), "undone")
	require.ErrorContains(t, err, "earlier join")
	_, err = resolve(t, reg, "dev2")
	require.NoError(t, err)
	account2 := join.AccountFor(reg.ID(ctx), reg.Namespace, "dev2")
	_, err = admin.CoreV1().ServiceAccounts(account2.Namespace).Get(ctx, account2.Name, metav1.GetOptions{})
	require.NoError(t, err, "a rejoin's refusal took away the account of the earlier join")
}

// Whoever can write a cluster set, or a member's namespaces, cannot use Join to take what is
// not theirs: a name taken by a Cluster for another server is refused, a namespace of the
// account's name that Join did not make is not adopted, and the token Join stores goes only to
// the member it names, whatever the Cluster says later.
func TestJoinAgainstSquattersAndRedirects(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	reg := newSet(t)

	// A Cluster named dev for another server: Join must not point it at this member's token.
	other := v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "dev", Namespace: reg.Namespace},
		Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
			ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://elsewhere.example.com"}},
		}},
	}
	_, err := reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).Create(ctx, &other, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "dev"})
	var taken *join.NameTakenError
	require.ErrorAs(t, err, &taken)
	require.Equal(t, "dev", taken.Name)
	_, err = reg.Kube.CoreV1().Secrets(reg.Namespace).Get(ctx, "dev-token", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "a token was stored for a name another server has: %v", err)

	// A namespace of the account's name, made by someone else on the member: not adopted.
	account := join.AccountFor(reg.ID(ctx), reg.Namespace, "squatted")
	member := memberKube()
	_, err = member.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: account.Namespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "squatted"})
	require.ErrorContains(t, err, "exists and is not this Cluster's")
	_, err = member.CoreV1().ServiceAccounts(account.Namespace).Get(ctx, account.Name, metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "Join made an account in a namespace it did not make: %v", err)
	// ... nor removed by Unjoin, which leaves what does not record the Cluster as its owner.
	removed, err := join.Unjoin(ctx, reg, "squatted", join.UnjoinOptions{Member: lf.Members[0].Config})
	require.NoError(t, err)
	require.Len(t, removed.LeftInPlace, 1, "%+v", removed)
	_, err = member.CoreV1().Namespaces().Get(ctx, account.Namespace, metav1.GetOptions{})
	require.NoError(t, err, "Unjoin removed a namespace that was not its")

	// The Secret is pinned: an editor of the Cluster who points it elsewhere gets no credential.
	res, err := join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "pinned"})
	require.NoError(t, err)
	c := res.Cluster.DeepCopy()
	c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = "https://harvest.example.com"
	_, err = reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).Update(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = resolve(t, reg, "pinned")
	var pinning *access.PinningError
	require.ErrorAs(t, err, &pinning, "the token Join stored would go to a server its Secret does not name")
}

// Joining one member in two cluster sets makes two accounts; unjoining one leaves the other's
// token working.
func TestUnjoinLeavesOtherSetsAlone(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	first, second := newSet(t), newSet(t)
	a, err := join.Join(ctx, lf.Members[0].Config, first, join.Options{Name: "dev", ClusterRole: "view"})
	require.NoError(t, err)
	b, err := join.Join(ctx, lf.Members[0].Config, second, join.Options{Name: "dev", ClusterRole: "view"})
	require.NoError(t, err)
	require.NotEqual(t, a.Account, b.Account)

	_, err = join.Unjoin(ctx, first, "dev", join.UnjoinOptions{Member: lf.Members[0].Config})
	require.NoError(t, err)
	resolved, err := resolve(t, second, "dev")
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfigAndClient(resolved.Config, resolved.HTTPClient)
	require.NoError(t, err)
	_, err = kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the second set's token does not work")
	// The member keeps accepting a token it checked for 10 s, so rather than wait, check what the
	// second set's token stands on: its account and the Secret it is bound to are still there.
	member := memberKube()
	_, err = member.CoreV1().ServiceAccounts(b.Account.Namespace).Get(ctx, b.Account.Name, metav1.GetOptions{})
	require.NoError(t, err, "unjoining one set removed another's account")
	secret, err := second.Kube.CoreV1().Secrets(second.Namespace).Get(ctx, b.Secret.Name, metav1.GetOptions{})
	require.NoError(t, err)
	binding := boundtoken.BoundSecret(string(secret.Data[v1alpha1.SecretTokenKey]))
	require.NotEmpty(t, binding)
	_, err = member.CoreV1().Secrets(b.Account.Namespace).Get(ctx, binding, metav1.GetOptions{})
	require.NoError(t, err, "unjoining one set revoked another's token")

	// Without the member, Unjoin removes the registry's side alone.
	removed, err := join.Unjoin(ctx, second, "dev", join.UnjoinOptions{})
	require.NoError(t, err)
	require.Len(t, removed.Deleted, 2)
	_, err = memberKube().CoreV1().ServiceAccounts(b.Account.Namespace).Get(ctx, b.Account.Name, metav1.GetOptions{})
	require.NoError(t, err, "Unjoin without a member config touched the member")
}

// Unjoin reads the member before it removes anything: an unreachable member removes nothing.
func TestUnjoinRemovesNothingWhenTheMemberDoesNotAnswer(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	reg := newSet(t)
	_, err := join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "dev"})
	require.NoError(t, err)
	gone := *lf.Members[0].Config
	gone.Host = "https://127.0.0.1:1"
	_, err = join.Unjoin(ctx, reg, "dev", join.UnjoinOptions{Member: &gone})
	var memberErr *join.MemberError
	require.ErrorAs(t, err, &memberErr)
	require.ErrorContains(t, err, "(nothing was removed)")
	_, err = reg.Clusters.ClusterregistryV1alpha1().Clusters(reg.Namespace).Get(ctx, "dev", metav1.GetOptions{})
	require.NoError(t, err, "the Cluster was removed though the member did not answer")
	_, err = join.Unjoin(ctx, reg, "dev", join.UnjoinOptions{Member: lf.Members[0].Config})
	require.NoError(t, err)
}

// requireCreatesNamespaces: the set's member account (as the registry resolves it) may create a
// namespace, and may not delete one.
func requireCreatesNamespaces(t *testing.T, reg join.Registry, member kubernetes.Interface) {
	t.Helper()
	ctx := t.Context()
	kube := joinedKube(t, reg, "dev")
	made := "joined-" + reg.Namespace
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: made}}, metav1.CreateOptions{})
	require.NoError(t, err, "the account joined with AllowNamespaceCreation may not create a namespace")
	require.True(t, apierrors.IsForbidden(kube.CoreV1().Namespaces().Delete(ctx, made, metav1.DeleteOptions{})), "the joined account may delete a namespace")
	require.NoError(t, member.CoreV1().Namespaces().Delete(ctx, made, metav1.DeleteOptions{}))
}

// joinedKube is a client of the member with the credentials the registry holds for Cluster name.
func joinedKube(t *testing.T, reg join.Registry, name string) kubernetes.Interface {
	t.Helper()
	resolved, err := resolve(t, reg, name)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfigAndClient(resolved.Config, resolved.HTTPClient)
	require.NoError(t, err)
	return kube
}

// The attacker holds a view join's token (a fleet-api reader's member credentials, say) and
// tries to write on the member with it: every write is refused, and the rules the member reports
// for it hold no verb but reading outside the token's own renewal. A join run again without
// AllowNamespaceCreation takes an earlier grant away.
func TestViewJoinWritesNothing(t *testing.T) {
	realservers.Required(t)
	ctx := t.Context()
	reg := newSet(t)
	res, err := join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "dev", ClusterRole: "view", AllowNamespaceCreation: true})
	require.NoError(t, err)
	_, err = memberKube().RbacV1().ClusterRoleBindings().Get(ctx, join.NamespaceCreatorBinding(res.Account), metav1.GetOptions{})
	require.NoError(t, err, "AllowNamespaceCreation made no binding to the namespace creator")
	again, err := join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "dev", ClusterRole: "view"})
	require.NoError(t, err)
	require.Equal(t, res.Account, again.Account)
	_, err = memberKube().RbacV1().ClusterRoleBindings().Get(ctx, join.NamespaceCreatorBinding(res.Account), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "joining again without AllowNamespaceCreation left the earlier grant: %v", err)

	kube := joinedKube(t, reg, "dev")
	name := "attacker-" + reg.Namespace
	writes := map[string]error{}
	_, writes["create a namespace"] = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	_, writes["create a ConfigMap in default"] = kube.CoreV1().ConfigMaps("default").Create(ctx,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	_, writes["bind itself to cluster-admin"] = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: res.Account.Namespace, Name: res.Account.Name}},
	}, metav1.CreateOptions{})
	writes["delete the default namespace's ConfigMaps"] = kube.CoreV1().ConfigMaps("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	for what, err := range writes {
		require.True(t, apierrors.IsForbidden(err), "a view join's token may %s: %v", what, err)
	}
	for _, ns := range []string{"default", "kube-system"} {
		review, err := kube.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authorizationv1.SelfSubjectRulesReview{
			Spec: authorizationv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, r := range review.Status.ResourceRules {
			if !slices.ContainsFunc(r.Resources, func(res string) bool { return !strings.HasPrefix(res, "selfsubject") }) {
				continue // every authenticated user may ask what it may do (system:basic-user)
			}
			for _, verb := range r.Verbs {
				require.Contains(t, []string{"get", "list", "watch"}, verb, "in %s, a view join's token may %s %v", ns, verb, r.Resources)
			}
		}
	}
}
