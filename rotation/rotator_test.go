package rotation_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/boundtoken"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	if code, child := simmembers.Main(); child { // BenchmarkRotate's simulated members
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 1}, nil)
}

// renewer makes, on the member, a service account that may ask for tokens of itself and nothing
// else (as join grants), and returns a 10-minute token of it.
func renewer(t *testing.T, member *localfleet.Member, name string) string {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(member.Config)
	_, err := kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().Roles("kube-system").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{name}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().RoleBindings("kube-system").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := kube.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// boundRenewer makes, on the member, what join makes: a namespace of the account's own, the
// account, and the rights of boundtoken.Rules; it returns a 10-minute token of it bound to a Secret.
func boundRenewer(t *testing.T, member *localfleet.Member, name string) string {
	t.Helper()
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(member.Config)
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().Roles(name).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: boundtoken.Rules(name)}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().RoleBindings(name).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: name, Name: name}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := boundtoken.Issue(ctx, kube.CoreV1(), name, name, 10*time.Minute)
	require.NoError(t, err)
	require.NotEmpty(t, boundtoken.BoundSecret(tr.Token))
	return tr.Token
}

// register stores the token in a Secret pinned to the member and naming its account, and a
// Cluster that uses it, in a cluster set of the test's own; it returns the set's members.
func register(t *testing.T, ns, account, token string) []*multicluster.Member {
	t.Helper()
	return registerAs(t, ns, "kube-system/"+account, token)
}

// registerAs is register with the account's namespace/name.
func registerAs(t *testing.T, ns, account, token string) []*multicluster.Member {
	t.Helper()
	ctx := context.Background()
	m := lf.Members[0]
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-token", Annotations: map[string]string{
			v1alpha1.ServersAnnotation: m.URL(), v1alpha1.ServiceAccountAnnotation: account}},
		Data: map[string][]byte{"token": []byte(token), "ca.crt": m.Config.CAData},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	c, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns).Create(ctx, &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "edge"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: m.URL()}}},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token",
				Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": "edge-token"}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)), ClientIP: netip.MustParseAddr("127.0.0.1")})
	require.NoError(t, err)
	return multicluster.MembersOf(resolver, []v1alpha1.Cluster{*c}, multicluster.FleetOptions{})
}

func secretOf(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Get(context.Background(), "edge-token", metav1.GetOptions{})
	require.NoError(t, err)
	return s
}

// A token is renewed once two thirds of its life have passed, with the current token, and the
// new one, with its expiry, replaces it in the same Secret, pinning and CA kept; it works.
func TestRenewsDueTokens(t *testing.T) {
	realservers.Required(t)
	ns := fleettest.CopySet(t, lf)
	old := renewer(t, lf.Members[0], "renewer-1")
	members := register(t, ns, "renewer-1", old)
	r, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config)})
	require.NoError(t, err)
	ctx := context.Background()

	_, ok := r.NextDue()
	require.False(t, ok, "a token is due before any pass read one")
	renewed, errs := rotation.RenewDueAt(r, ctx, time.Now())
	require.Empty(t, errs)
	require.Empty(t, renewed, "a fresh token was renewed")
	// NextDue says when, and Run's next pass is then, not an Interval (a minute) later.
	due, ok := r.NextDue()
	require.True(t, ok)
	require.Equal(t, "edge-token", due.Secret.Name)
	require.Equal(t, "edge", due.Member.Name)
	_, expires := access.TokenExpiry(old)
	require.WithinDuration(t, expires.Add(-10*time.Minute/3), due.At, 5*time.Second, "due at 2/3 of a 10-minute token's life")
	require.Equal(t, time.Minute, rotation.UntilNextPass(r, due.At.Add(-2*time.Minute)))
	require.Equal(t, 30*time.Second, rotation.UntilNextPass(r, due.At.Add(-30*time.Second)))
	require.Equal(t, time.Second, rotation.UntilNextPass(r, due.At.Add(time.Minute)), "a token past due is tried again at once, not a minute late")

	renewed, errs = rotation.RenewDueAt(r, ctx, time.Now().Add(7*time.Minute)) // past 2/3 of 10 minutes
	require.Empty(t, errs)
	require.Len(t, renewed, 1)
	next, ok := r.NextDue()
	require.True(t, ok)
	require.WithinDuration(t, renewed[0].Expires.Add(-10*time.Minute/3), next.At, 5*time.Second, "the renewed token is due at 2/3 of its own life")

	s := secretOf(t, ns)
	fresh := string(s.Data["token"])
	require.NotEqual(t, old, fresh)
	require.Equal(t, lf.Members[0].URL(), s.Annotations[v1alpha1.ServersAnnotation])
	require.Equal(t, lf.Members[0].Config.CAData, s.Data["ca.crt"])
	require.Equal(t, renewed[0].Expires.UTC().Format(time.RFC3339), s.Annotations[v1alpha1.TokenExpiresAnnotation])
	_, expires = access.TokenExpiry(fresh)
	require.WithinDuration(t, time.Now().Add(10*time.Minute), expires, time.Minute, "the new token lives as long as the old")
	cfg := &rest.Config{Host: lf.Members[0].URL(), BearerToken: fresh, TLSClientConfig: rest.TLSClientConfig{CAData: lf.Members[0].Config.CAData}}
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "renewer-1",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	require.NoError(t, err, "the new token does not work")
}

// Whoever edits the Secret's annotation to name a stronger account gets no token of it: the
// Rotator asks with the current token, which may ask only for tokens of its own account. The
// Secret is left as it was, and the error carries no token.
func TestRenewalAsksOnlyForItsOwnAccount(t *testing.T) {
	realservers.Required(t)
	ns := fleettest.CopySet(t, lf)
	old := renewer(t, lf.Members[0], "renewer-2")
	members := register(t, ns, "localfleet-admin", old) // the annotation names the cluster-admin account
	r, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config)})
	require.NoError(t, err)
	renewed, errs := rotation.RenewDueAt(r, context.Background(), time.Now().Add(7*time.Minute))
	require.Empty(t, renewed)
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "forbidden")
	require.NotContains(t, errs[0].Error(), old)
	require.Equal(t, old, string(secretOf(t, ns).Data["token"]))
}

// A token bound to a Secret is renewed bound to a new one, and the Secret of the one it replaced
// is deleted: the replaced token is refused from then on, the new one works, and the account's
// namespace holds one binding, the new token's.
func TestRenewalRevokesTheReplacedToken(t *testing.T) {
	realservers.Required(t)
	ns := fleettest.CopySet(t, lf)
	old := boundRenewer(t, lf.Members[0], "bound-renewer")
	members := registerAs(t, ns, "bound-renewer/bound-renewer", old)
	r, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config)})
	require.NoError(t, err)
	ctx := context.Background()
	renewed, errs := rotation.RenewDueAt(r, ctx, time.Now().Add(7*time.Minute))
	require.Empty(t, errs)
	require.Len(t, renewed, 1)
	require.Equal(t, 1, renewed[0].Revoked)
	fresh := string(secretOf(t, ns).Data["token"])
	require.NotEqual(t, boundtoken.BoundSecret(old), boundtoken.BoundSecret(fresh))

	member := func(token string) kubernetes.Interface {
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: lf.Members[0].URL(), BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAData: lf.Members[0].Config.CAData}})
	}
	require.Eventually(t, func() bool {
		_, err := member(old).CoreV1().Secrets("bound-renewer").List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err)
	}, 30*time.Second, 100*time.Millisecond, "the replaced token still works")
	bindings, err := member(fresh).CoreV1().Secrets("bound-renewer").List(ctx, metav1.ListOptions{LabelSelector: boundtoken.BindingLabel})
	require.NoError(t, err, "the new token does not work")
	require.Len(t, bindings.Items, 1)
	require.Equal(t, boundtoken.BoundSecret(fresh), bindings.Items[0].Name)

	// Whoever edits the Secret to name an account of another namespace, where the account may
	// make no Secret, gets nothing there, and the Secret keeps its token.
	s := secretOf(t, ns)
	s.Annotations[v1alpha1.ServiceAccountAnnotation] = "kube-system/bound-renewer"
	_, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	renewed, errs = rotation.RenewDueAt(r, ctx, time.Now().Add(7*time.Minute))
	require.Empty(t, renewed)
	require.Len(t, errs, 1)
	require.ErrorContains(t, errs[0], "forbidden")
	require.NotContains(t, errs[0].Error(), fresh)
	require.Equal(t, fresh, string(secretOf(t, ns).Data["token"]))
	inSystem, err := kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{LabelSelector: boundtoken.BindingLabel})
	require.NoError(t, err)
	require.Empty(t, inSystem.Items)
}

// Replicas with LeaderElection take turns: only the Lease's holder renews, so the member is asked
// for one token per renewal. When the holder stops, the other takes over.
func TestReplicasTakeTurns(t *testing.T) {
	realservers.Required(t)
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	ns := fleettest.CopySet(t, lf)
	members := registerAs(t, ns, "turns/turns", boundRenewer(t, lf.Members[0], "turns"))
	var renewals [2]atomic.Int32
	var stops [2]context.CancelFunc
	var done sync.WaitGroup
	for i := range 2 {
		logger := funcr.New(func(_, args string) {
			if strings.Contains(args, `"renewed a member's token"`) {
				renewals[i].Add(1)
			}
		}, funcr.Options{})
		r, err := rotation.New(fleettest.Fixed(members), rotation.Options{Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config), RenewAt: 1e-9,
			TTL: 10 * time.Minute, Interval: 300 * time.Millisecond, Logger: logger,
			LeaderElection: &rotation.LeaderElection{Namespace: ns, Identity: fmt.Sprint("replica-", i),
				LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		stops[i] = cancel
		done.Add(1)
		go func() {
			defer done.Done()
			require.NoError(t, r.Run(ctx))
		}()
	}
	defer func() {
		stops[0]()
		stops[1]()
		done.Wait()
	}()
	require.Eventually(t, func() bool { return renewals[0].Load()+renewals[1].Load() >= 3 }, 20*time.Second, 100*time.Millisecond)
	leading := 0
	if renewals[1].Load() > 0 {
		leading = 1
	}
	require.Zero(t, renewals[1-leading].Load(), "both replicas renewed")
	stops[leading]() // releases the Lease
	require.Eventually(t, func() bool { return renewals[1-leading].Load() > 0 }, 20*time.Second, 100*time.Millisecond, "the other replica did not take over")
}
