package rotation_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/rotation"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// soakFor reads a duration from the environment, for the long run of TestRotationUnderLoad.
func soakFor(t *testing.T, name string, short time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return short
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, "%s", name)
	return d
}

// Tokens rotate under a running fan-out loop and a running watch cache, and nothing notices: no
// fan-out call fails, the cache never restarts and misses no object made meanwhile, and every
// replaced token is refused afterwards. Each renewal is forced (RenewAt near 0) and asks for the
// member's minimum TTL, ten minutes. By default it rotates every second for 10 seconds; the
// proof the README cites ran ROTATION_SOAK=10m ROTATION_EVERY=1m (a rotation a minute for ten
// minutes).
func TestRotationUnderLoad(t *testing.T) {
	realservers.Required(t)
	defer goleak.VerifyNone(t, append(fleetmain.IgnoreIdleConnections, goleak.IgnoreCurrent())...)
	runFor, every := soakFor(t, "ROTATION_SOAK", 10*time.Second), soakFor(t, "ROTATION_EVERY", time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := fleettest.CopySet(t, lf)
	admin := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	token := boundRenewer(t, lf.Members[0], "under-load")
	// The account reads, as join's account would (join binds --cluster-role).
	_, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "under-load"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "under-load", Name: "under-load"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	registerAs(t, ns, "under-load/under-load", token)

	registryKube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(registryKube), ClientIP: netip.MustParseAddr("127.0.0.1")})
	require.NoError(t, err)
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(ctx))
	defer fleet.Stop()
	// The set's other member, reached with an administrator's token, is left alone by the
	// Rotator; the checks are of "edge".
	member := types.NamespacedName{Namespace: ns, Name: "edge"}
	require.Eventually(t, func() bool { return fleet.Member(ns, "edge") != nil }, 10*time.Second, 50*time.Millisecond)

	// The watch cache: ConfigMaps of the member's namespace "under-load", each one seen once.
	cache := fleetcache.New(fleet)
	configMaps, err := fleetcache.Typed[*corev1.ConfigMap](cache, corev1.SchemeGroupVersion.WithResource("configmaps"), fleetcache.KindOptions{})
	require.NoError(t, err)
	var seenMu sync.Mutex
	seen := map[string]int{}
	require.NoError(t, configMaps.AddEventHandler(func(e fleetcache.Event[*corev1.ConfigMap]) {
		if e.Type == fleetcache.Added && e.Member.Name() == member && strings.HasPrefix(e.Object.Name, "made-") {
			seenMu.Lock()
			seen[e.Object.Name]++
			seenMu.Unlock()
		}
	}))
	require.NoError(t, cache.Start(ctx))
	defer cache.Stop()
	require.NoError(t, configMaps.WaitForCacheSync(ctx, 30*time.Second))
	synced, _ := configMaps.Status(member)
	require.True(t, synced.Fresh(), "%s", synced)

	// The load (rotationLoad's doc says what it is).
	load := startRotationLoad(t, ctx, fleet, ns, admin)

	// The rotations, forced.
	r, err := rotation.New(fleet, rotation.Options{Kube: registryKube, RenewAt: 1e-9, TTL: 10 * time.Minute, Interval: every})
	require.NoError(t, err)
	replaced, current := rotateFor(t, r, ns, token, runFor, every)
	time.Sleep(2 * time.Second) // calls made right after the last rotation
	load.stop()

	t.Logf("%d rotations in %s; %d fan-out calls and %d calls of a long-lived client, %d failed; %d ConfigMaps made",
		len(replaced), runFor, load.calls.Load(), load.longLivedCalls.Load(), load.failed.Load(), load.made)
	require.Zero(t, load.failed.Load(), "a call failed across a rotation: %v", load.firstFailure.Load())
	require.Greater(t, load.calls.Load(), int64(len(replaced)), "the fan-out loop hardly ran")
	after, _ := configMaps.Status(member)
	require.True(t, after.Fresh(), "%s", after)
	require.Equal(t, synced.Since, after.Since, "the member's cache restarted or went stale: %s", after)
	require.Eventually(t, func() bool {
		items, _ := configMaps.List(member, labels.Everything())
		return len(items) >= load.made
	}, 10*time.Second, 50*time.Millisecond, "the cache misses ConfigMaps made during the rotations")
	seenMu.Lock()
	for i := range load.made {
		require.Equal(t, 1, seen[fmt.Sprintf("made-%d", i)], "made-%d seen as Added %d times", i, seen[fmt.Sprintf("made-%d", i)])
	}
	seenMu.Unlock()

	requireOnlyCurrentWorks(t, replaced, current)
}

// rotateFor renews the token of ns's member, starting from token, every every for runFor, each
// renewal revoking the token it replaces: the tokens replaced, and the current one.
func rotateFor(t *testing.T, r *rotation.Rotator, ns, token string, runFor, every time.Duration) (replaced []string, current string) {
	replaced = []string{token}
	for end := time.Now().Add(runFor); time.Now().Before(end); time.Sleep(every) {
		renewed, errs := r.RenewDue(t.Context())
		require.Empty(t, errs)
		require.Len(t, renewed, 1)
		require.Equal(t, 1, renewed[0].Revoked)
		replaced = append(replaced, string(secretOf(t, ns).Data["token"]))
	}
	return replaced[:len(replaced)-1], replaced[len(replaced)-1]
}

// rotationLoad is the load on a member while its token rotates: a fan-out that lists, back to
// back; a client built once, as caches and controllers build theirs, on the member's Transport,
// that lists too; and an administrator who makes ConfigMaps. Read its counts after stop.
type rotationLoad struct {
	calls, failed, longLivedCalls atomic.Int64
	firstFailure                  atomic.Value
	made                          int // ConfigMaps made-0 to made-(made-1)
	wg                            sync.WaitGroup
	stop                          func() // ends the load, and waits for it
}

// startRotationLoad starts the load on member "edge" of ns, the ConfigMaps made by admin.
func startRotationLoad(t *testing.T, ctx context.Context, fleet *multicluster.Fleet, ns string, admin kubernetes.Interface) *rotationLoad {
	loadCtx, stop := context.WithCancel(ctx)
	l := &rotationLoad{}
	l.wg.Add(3)
	l.stop = func() { stop(); l.wg.Wait() }
	edge := fleet.Member(ns, "edge")
	resolved, err := edge.Config(ctx)
	require.NoError(t, err)
	longLived, err := kubernetes.NewForConfigAndClient(rest.CopyConfig(resolved), &http.Client{Transport: edge.Transport()})
	require.NoError(t, err)
	go func() {
		defer l.wg.Done()
		for loadCtx.Err() == nil {
			_, err := longLived.CoreV1().ConfigMaps("under-load").List(loadCtx, metav1.ListOptions{Limit: 1})
			if loadCtx.Err() != nil {
				return
			}
			l.longLivedCalls.Add(1)
			if err != nil {
				l.failed.Add(1)
				l.firstFailure.CompareAndSwap(nil, "a client on Member.Transport: "+err.Error())
			}
		}
	}()
	go func() {
		defer l.wg.Done()
		for loadCtx.Err() == nil {
			results := multicluster.ForEach(loadCtx, fleet.Members(), func(ctx context.Context, m *multicluster.Member) error {
				kube, err := m.Kubernetes(ctx)
				if err != nil {
					return err
				}
				_, err = kube.CoreV1().ConfigMaps("under-load").List(ctx, metav1.ListOptions{Limit: 1})
				return err
			}, multicluster.Timeout(10*time.Second))
			if loadCtx.Err() != nil {
				return
			}
			l.calls.Add(1)
			if err := results.Err(); err != nil {
				l.failed.Add(1)
				l.firstFailure.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	go func() {
		defer l.wg.Done()
		for i := 0; loadCtx.Err() == nil; i++ {
			if _, err := admin.CoreV1().ConfigMaps("under-load").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("made-%d", i)}}, metav1.CreateOptions{}); err != nil {
				l.firstFailure.CompareAndSwap(nil, "making a ConfigMap: "+err.Error())
				return
			}
			l.made = i + 1
			select {
			case <-loadCtx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return l
}

// requireOnlyCurrentWorks: every replaced token is refused by member-1, and the current one works.
func requireOnlyCurrentWorks(t *testing.T, replaced []string, current string) {
	ctx := t.Context()
	with := func(token string) kubernetes.Interface {
		return kubernetes.NewForConfigOrDie(&rest.Config{Host: lf.Members[0].URL(), BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAData: lf.Members[0].Config.CAData}})
	}
	for i, old := range replaced {
		require.Eventually(t, func() bool {
			_, err := with(old).CoreV1().ConfigMaps("under-load").List(ctx, metav1.ListOptions{Limit: 1})
			return apierrors.IsUnauthorized(err)
		}, 10*time.Second, 100*time.Millisecond, "replaced token %d of %d still works", i+1, len(replaced))
	}
	_, err := with(current).CoreV1().ConfigMaps("under-load").List(ctx, metav1.ListOptions{Limit: 1})
	require.NoError(t, err, "the current token does not work")
}
