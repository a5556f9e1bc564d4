package fleetcache

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

var configMaps = corev1.SchemeGroupVersion.WithResource("configmaps")

// newTestSet is a cluster set of the test's own (copySet), with a namespace of the same name on
// every member if memberNamespaces; the test fails if it leaves goroutines behind.
func newTestSet(t *testing.T, memberNamespaces bool) string {
	t.Helper()
	realservers.Required(t)
	t.Cleanup(func() { goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...) })
	ns := fleettest.CopySet(t, lf)
	if memberNamespaces {
		newMemberNamespace(t, ns)
	}
	return ns
}

// key is a member's name in a test's cluster set.
func key(ns string, m *localfleet.Member) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: m.Name}
}

// createConfigMap makes a ConfigMap labelled for the test on a member.
func createConfigMap(t *testing.T, m *localfleet.Member, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"test": ns}}}
	_, err := memberKube(t, m).CoreV1().ConfigMaps(ns).Create(testContext(t), cm, metav1.CreateOptions{})
	require.NoError(t, err)
}

// A kind asked for once is cached on every member, listed fleet-wide with each object's member,
// and its events say which member they come from; a kind asked for later starts on every member;
// a member that leaves takes its caches with it, goroutines included.
func TestCacheFollowsMembers(t *testing.T) {
	ns := newTestSet(t, true)
	fleet := startFleet(t, ns)
	ctx := testContext(t)

	c := New(fleet)
	cms, err := Typed[*corev1.ConfigMap](c, configMaps, KindOptions{})
	require.NoError(t, err)
	var mu sync.Mutex
	var events []string
	require.NoError(t, cms.AddEventHandler(func(ev Event[*corev1.ConfigMap]) {
		if ev.Object.Labels["test"] != ns {
			return
		}
		require.Empty(t, ev.Object.ManagedFields, "managed fields are dropped")
		mu.Lock()
		defer mu.Unlock()
		events = append(events, fmt.Sprintf("%s %s %s", ev.Type, ev.Member.Name().Name, ev.Object.Name))
	}))
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	require.ErrorIs(t, c.Start(ctx), ErrRunning)
	require.NoError(t, cms.WaitForCacheSync(ctx, 30*time.Second))
	for _, s := range cms.Statuses() {
		require.True(t, s.Fresh(), s.String())
	}

	for _, m := range lf.Members {
		createConfigMap(t, m, ns, "on-"+m.Name)
	}
	selector := labels.SelectorFromSet(labels.Set{"test": ns})
	require.Eventually(t, func() bool { return len(cms.ListAll(selector)) == 2 }, 10*time.Second, 20*time.Millisecond)
	for _, item := range cms.ListAll(selector) {
		require.Equal(t, "on-"+item.Member.Name().Name, item.Object.Name, "each object is named with its member")
	}
	got, ok, err := cms.Get(key(ns, lf.Members[1]), ns, "on-member-2")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "on-member-2", got.Name)
	inNS, err := cms.ByIndex(key(ns, lf.Members[0]), cache.NamespaceIndex, ns)
	require.NoError(t, err)
	require.Len(t, inNS, 1, "the test's ConfigMap (no controller makes kube-root-ca.crt)")
	_, err = cms.List(types.NamespacedName{Namespace: ns, Name: "nobody"}, nil)
	require.ErrorIs(t, err, ErrNoSuchMember)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		sort.Strings(events)
		return fmt.Sprint(events) == "[Added member-1 on-member-1 Added member-2 on-member-2]"
	}, 10*time.Second, 20*time.Millisecond)
	fc := &followingCache{ns: ns, ctx: ctx, c: c, cms: cms, selector: selector}
	fc.lateChannel(t)
	fc.metadataKind(t)
	fc.dynamicKind(t)
	fc.askedAgain(t)
	fc.generation(t)
	fc.memberLeaves(t)
}

// followingCache is what the parts of TestCacheFollowsMembers share, in order.
type followingCache struct {
	ns         string
	ctx        context.Context
	c          *Cache
	cms        *Kind[*corev1.ConfigMap]
	selector   labels.Selector
	namespaces *Kind[*metav1.PartialObjectMetadata]
}

// lateChannel: a channel asked for once objects are cached is first told of each, as Added, filled
// as it is read.
func (fc *followingCache) lateChannel(t *testing.T) {
	ns, ctx, cms := fc.ns, fc.ctx, fc.cms
	// A channel asked for once objects are cached is first told of each, as Added, even with a
	// buffer smaller than what is cached: it is filled as it is read, not before Events returns.
	lateCtx, stopLate := context.WithCancel(ctx)
	late, err := cms.Events(lateCtx, 1)
	require.NoError(t, err)
	var lateSeen []string
	for ev := range late {
		if ev.Object.Labels["test"] == ns {
			lateSeen = append(lateSeen, fmt.Sprintf("%s %s", ev.Type, ev.Object.Name))
		}
		if len(lateSeen) == 2 {
			break
		}
	}
	stopLate()
	sort.Strings(lateSeen)
	require.Equal(t, []string{"Added on-member-1", "Added on-member-2"}, lateSeen)
}

// metadataKind: a kind asked for after Start, metadata only, and a channel of its events.
func (fc *followingCache) metadataKind(t *testing.T) {
	ns, ctx, c := fc.ns, fc.ctx, fc.c
	// A kind asked for after Start, metadata only, and a channel of its events.
	namespaces, err := Metadata(c, corev1.SchemeGroupVersion.WithResource("namespaces"), KindOptions{})
	require.NoError(t, err)
	evCtx, stopEvents := context.WithCancel(ctx)
	stream, err := namespaces.Events(evCtx, 100)
	require.NoError(t, err)
	require.NoError(t, namespaces.WaitForCacheSync(ctx, 30*time.Second))
	for _, m := range lf.Members {
		nsObj, ok, err := namespaces.Get(key(ns, m), "", ns)
		require.NoError(t, err)
		require.True(t, ok, "member %s's namespace %s", m.Name, ns)
		require.Equal(t, ns, nsObj.Name)
	}
	seen := map[string]bool{}
	for ev := range stream {
		if ev.Object.Name == ns {
			seen[ev.Member.Name().Name] = true
		}
		if len(seen) == 2 {
			break
		}
	}
	stopEvents()
	fc.namespaces = namespaces
}

// dynamicKind: the same resource, dynamic: unstructured objects, each named with its member.
func (fc *followingCache) dynamicKind(t *testing.T) {
	ctx, c, selector := fc.ctx, fc.c, fc.selector
	// The same resource, dynamic: unstructured objects, each named with its member.
	dyn, err := Dynamic(c, configMaps, KindOptions{})
	require.NoError(t, err)
	require.NoError(t, dyn.WaitForCacheSync(ctx, 30*time.Second))
	unstructuredItems := dyn.ListAll(selector)
	require.Len(t, unstructuredItems, 2)
	for _, item := range unstructuredItems {
		require.Equal(t, "on-"+item.Member.Name().Name, item.Object.GetName())
		require.Empty(t, item.Object.GetManagedFields())
	}
}

// askedAgain: asking again for a kind gives the same Kind; as another type, it is refused.
func (fc *followingCache) askedAgain(t *testing.T) {
	c, cms := fc.c, fc.cms
	// Asking again for a kind gives the same Kind; asking for it as another type is refused,
	// whether the type is another resource's or another way of caching it.
	again, err := Typed[*corev1.ConfigMap](c, configMaps, KindOptions{})
	require.NoError(t, err)
	require.Same(t, cms, again)
	_, err = Typed[*corev1.Secret](c, configMaps, KindOptions{})
	require.ErrorContains(t, err, "configmaps (v1) does not hold *v1.Secret (kind Secret)")
	_, err = Typed[*corev1.ConfigMap](c, corev1.SchemeGroupVersion.WithResource("secrets"), KindOptions{})
	require.ErrorContains(t, err, "secrets (v1) does not hold *v1.ConfigMap")
	_, err = Typed[*corev1.ConfigMap](c, corev1.SchemeGroupVersion.WithResource("nosuchthings"), KindOptions{})
	require.Error(t, err)
}

// memberLeaves: a member that leaves the registry leaves the caches.
// generation: a Kind's Generation stays put while nothing it caches changes, and has moved on
// once a change can be read.
func (fc *followingCache) generation(t *testing.T) {
	ns, ctx := fc.ns, fc.ctx
	// The test's own ConfigMaps alone, so that no other test's changes move it.
	own, err := Typed[*corev1.ConfigMap](fc.c, configMaps, KindOptions{LabelSelector: "generation=" + ns})
	require.NoError(t, err)
	require.NoError(t, own.WaitForCacheSync(ctx, 30*time.Second))
	g := own.Generation()
	require.Never(t, func() bool { return own.Generation() != g }, 2*time.Second, 50*time.Millisecond,
		"the Generation moved while nothing changed")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "generation", Labels: map[string]string{"generation": ns}}}
	_, err = memberKube(t, lf.Members[0]).CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return own.Generation() > g }, 10*time.Second, 20*time.Millisecond)
	_, ok, err := own.Get(key(ns, lf.Members[0]), ns, "generation")
	require.NoError(t, err)
	require.True(t, ok, "the Generation moved before the change could be read")
}

func (fc *followingCache) memberLeaves(t *testing.T) {
	ns, ctx, cms, selector, namespaces := fc.ns, fc.ctx, fc.cms, fc.selector, fc.namespaces
	// A member that leaves the registry leaves the caches, and moves the Generation on.
	g := cms.Generation()
	require.NoError(t, versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns).
		Delete(ctx, lf.Members[1].Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return len(cms.Statuses()) == 1 && len(namespaces.Statuses()) == 1 }, 10*time.Second, 20*time.Millisecond)
	items := cms.ListAll(selector)
	require.Len(t, items, 1)
	require.Equal(t, "member-1", items[0].Member.Name().Name)
	_, err := cms.List(key(ns, lf.Members[1]), nil)
	require.ErrorIs(t, err, ErrNoSuchMember)
	require.Greater(t, cms.Generation(), g)
}

// A member that cannot be reached holds up no other: WaitForCacheSync gives it up at its own
// deadline and names it, with why, and never a credential.
func TestDeadMemberDoesNotBlockSync(t *testing.T) {
	ns := newTestSet(t, false)
	ctx := testContext(t)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	dead, err := registry.Get(ctx, lf.Members[0].Name, metav1.GetOptions{})
	require.NoError(t, err)
	dead.ObjectMeta = metav1.ObjectMeta{Name: "dead", Namespace: ns}
	dead.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = "https://127.0.0.1:1"
	_, err = registry.Create(ctx, dead, metav1.CreateOptions{})
	require.NoError(t, err)
	fleet := startFleet(t, ns)

	c := New(fleet)
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	cms, err := Typed[*corev1.ConfigMap](c, configMaps, KindOptions{})
	require.NoError(t, err)
	start := time.Now()
	syncErr := cms.WaitForCacheSync(ctx, 3*time.Second)
	var notSynced *NotSyncedError
	require.ErrorAs(t, syncErr, &notSynced)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Len(t, notSynced.Members, 1, "%v", syncErr)
	st := notSynced.Members[types.NamespacedName{Namespace: ns, Name: "dead"}]
	require.Equal(t, Syncing, st.State)
	require.ErrorContains(t, st.Err, "127.0.0.1:1")
	require.Contains(t, syncErr.Error(), ns+"/dead (syncing since")
	for _, m := range lf.Members {
		s, ok := cms.Status(key(ns, m))
		require.True(t, ok)
		require.True(t, s.Fresh(), "member %s: %s", m.Name, s)
	}
	secrets, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	for _, s := range secrets.Items {
		if tok := s.Data["token"]; len(tok) > 0 {
			require.NotContains(t, syncErr.Error(), string(tok))
		}
	}
}

// serviceAccountToken makes a cluster-admin service account on the member and returns a token.
func serviceAccountToken(t *testing.T, kube kubernetes.Interface, name string) string {
	t.Helper()
	ctx := testContext(t)
	_, err := kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: name}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := kube.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// setToken stores token in the member's token Secret of the cluster set.
func setToken(t *testing.T, ns string, m *localfleet.Member, token string) {
	t.Helper()
	secrets := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns)
	s, err := secrets.Get(testContext(t), m.Name+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	s.Data["token"] = []byte(token)
	_, err = secrets.Update(testContext(t), s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// A member whose API server goes down shows as stale since then, with why, and keeps what it
// held; credentials rotated meanwhile (the old token revoked) are used when it is back, by the
// same informer: nothing is restarted, and changes made after are seen.
func TestStaleMemberAndRotation(t *testing.T) {
	ns := newTestSet(t, true)
	m := lf.Members[0]
	require.Equal(t, v1alpha1.ProviderTypeSecret, m.ProviderType)
	kube := memberKube(t, m)
	oldToken := serviceAccountToken(t, kube, ns+"-old")
	setToken(t, ns, m, oldToken)
	createConfigMap(t, m, ns, "before")

	fleet := startFleet(t, ns)
	ctx := testContext(t)
	c := New(fleet)
	cms, err := Typed[*corev1.ConfigMap](c, configMaps, KindOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	require.NoError(t, cms.WaitForCacheSync(ctx, 30*time.Second))
	member := key(ns, m)
	st := c.memberCaches(member).informer(cms.id)
	informer, _ := st.get()

	// Rotate: a new token in the Secret, the old one revoked with its service account.
	newToken := serviceAccountToken(t, kube, ns+"-new")
	setToken(t, ns, m, newToken)
	require.NoError(t, kube.CoreV1().ServiceAccounts("kube-system").Delete(ctx, ns+"-old", metav1.DeleteOptions{}))

	require.NoError(t, m.StopAPIServer())
	restarted := false
	defer func() {
		if !restarted {
			_ = m.StartAPIServer()
		}
	}()
	stoppedAt := time.Now()
	require.Eventually(t, func() bool { s, _ := cms.Status(member); return s.State == Stale }, 20*time.Second, 20*time.Millisecond)
	s, _ := cms.Status(member)
	require.Error(t, s.Err)
	require.WithinDuration(t, stoppedAt, s.Since, 10*time.Second)
	require.Contains(t, s.String(), "stale since")
	for _, tok := range []string{oldToken, newToken} {
		require.NotContains(t, s.String(), tok)
	}
	before, ok, err := cms.Get(member, ns, "before")
	require.NoError(t, err)
	require.True(t, ok, "a stale cache keeps what it held")
	require.Equal(t, "before", before.Name)
	other, _ := cms.Status(key(ns, lf.Members[1]))
	require.True(t, other.Fresh(), "the other member: %s", other)

	require.NoError(t, m.StartAPIServer())
	restarted = true
	require.Eventually(t, func() bool { s, _ := cms.Status(member); return s.Fresh() }, 60*time.Second, 50*time.Millisecond)
	createConfigMap(t, m, ns, "after")
	require.Eventually(t, func() bool { _, ok, _ := cms.Get(member, ns, "after"); return ok }, 20*time.Second, 20*time.Millisecond)

	same := c.memberCaches(member).informer(cms.id)
	require.Same(t, st, same, "the member's caches were restarted")
	now, _ := same.get()
	require.Same(t, informer, now)
	// The old token no longer works: the informer's requests carried the new one.
	_, err = kubernetes.NewForConfigOrDie(tokenConfig(m, oldToken)).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	require.Error(t, err)
	require.True(t, apierrors.IsUnauthorized(err), "%v", err)
}

// A Cluster edited to reach its member differently restarts the member's caches, from a list.
func TestReachChangeRestarts(t *testing.T) {
	ns := newTestSet(t, false)
	fleet := startFleet(t, ns)
	ctx := testContext(t)
	c := New(fleet)
	cms, err := Typed[*corev1.ConfigMap](c, configMaps, KindOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	require.NoError(t, cms.WaitForCacheSync(ctx, 30*time.Second))
	m := lf.Members[1]
	before := c.memberCaches(key(ns, m))

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	cl, err := clusters.Get(ctx, m.Name, metav1.GetOptions{})
	require.NoError(t, err)
	cl.Spec.AuthInfo.Providers[0].Name = "renamed"
	_, err = clusters.Update(ctx, cl, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.memberCaches(key(ns, m)) != before }, 10*time.Second, 20*time.Millisecond)
	require.Error(t, before.ctx.Err(), "the old caches were stopped")
	require.NoError(t, cms.WaitForCacheSync(ctx, 30*time.Second))
	s, ok := cms.Status(key(ns, m))
	require.True(t, ok)
	require.True(t, s.Fresh(), s.String())
	_, ok, err = cms.Get(key(ns, m), "kube-system", "extension-apiserver-authentication")
	require.NoError(t, err)
	require.True(t, ok, "the restarted cache listed the member")
}

// tokenConfig reaches the member with a bearer token alone.
func tokenConfig(m *localfleet.Member, token string) *rest.Config {
	return &rest.Config{Host: m.Config.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: m.Config.CAData}}
}
