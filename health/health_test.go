package health_test

import (
	"context"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

func TestMain(m *testing.M) {
	// The benchmark's simulated members run in child processes of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	flag.Parse()
	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// fastOptions probe often and damp little, so that tests see transitions in seconds.
func fastOptions(lf *localfleet.Fleet) health.Options {
	return health.Options{
		Registry:         versioned.NewForConfigOrDie(lf.Registry.Config),
		Kube:             kubernetes.NewForConfigOrDie(lf.Registry.Config),
		Resolver:         resolverFor(lf),
		Namespaces:       []string{lf.Namespace},
		Interval:         300 * time.Millisecond,
		Timeout:          5 * time.Second, // more than the API server's own etcd check takes to fail
		FailureThreshold: 2,
		SuccessThreshold: 1,
		Heartbeat:        time.Hour,
	}
}

func resolverFor(lf *localfleet.Fleet) *access.Resolver {
	r, err := access.NewResolver(access.ResolverOptions{
		Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
		// Reread credentials every second, not every 30: the tests rotate and delete them.
		RevalidateAfter: time.Second,
	})
	if err != nil {
		panic(err)
	}
	return r
}

// start runs a controller; stop ends it and waits for Run to return.
func start(t *testing.T, opts health.Options) (stop func()) {
	t.Helper()
	c, err := health.New(opts)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := c.Run(ctx); err != context.Canceled {
			t.Errorf("Run: %v", err)
		}
	})
	return func() { cancel(); wg.Wait() }
}

// ready is a Cluster's Ready condition as "Status/Reason", or "none".
func ready(t *testing.T, lf *localfleet.Fleet, name string) (string, *v1alpha1.Cluster) {
	t.Helper()
	c, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	cond := c.Status.Condition(v1alpha1.ConditionReady)
	if cond == nil {
		return "none", c
	}
	return string(cond.Status) + "/" + cond.Reason, c
}

func waitFor(t *testing.T, lf *localfleet.Fleet, name, want string) *v1alpha1.Cluster {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got, c := ready(t, lf, name)
		if got == want {
			return c
		}
		require.True(t, time.Now().Before(deadline), "%s: Ready is %s, want %s", name, got, want)
	}
}

func TestHealthAgainstRealMembers(t *testing.T) {
	realservers.Required(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ignore := goleak.IgnoreCurrent()
	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 3})
	require.NoError(t, err)
	registryKube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	opts := fastOptions(lf)
	var logs lockedBuffer
	opts.Logger = funcr.New(func(prefix, args string) { logs.WriteString(prefix + args + "\n") }, funcr.Options{Verbosity: 1})
	stop := start(t, opts)
	defer func() {
		// The controller first: the registry would wait a minute for its watch to drain.
		stop()
		require.NoError(t, lf.Stop())
		// Nothing the controller started outlives it: workers, the Fleet, the event broadcaster,
		// connections (they end with their servers).
		goleak.VerifyNone(t, ignore)
	}()
	f := &realMembers{ctx: ctx, lf: lf, registryKube: registryKube, logs: &logs}
	t.Run("every member reachable, with its version and identity", f.everyMemberReachableWithItsVersionAndIdentity)
	t.Run("a stopped member is Unreachable, and Reachable again once back", f.aStoppedMemberIsUnreachableAndReachableAgainOnceBack)
	t.Run("a revoked token is Unauthorized", f.aRevokedTokenIsUnauthorized)
	t.Run("a deleted Secret is CredentialsUnavailable, naming the provider", f.aDeletedSecretIsCredentialsUnavailableNamingTheProvider)
	t.Run("a member whose etcd is frozen is NotReady, naming the check", f.aMemberWhoseEtcdIsFrozenIsNotReadyNamingTheCheck)
	t.Run("a Cluster with no endpoint for the controller's network is NoEndpoint", f.aClusterWithNoEndpointForTheControllersNetworkIsNoEndpoint)
	t.Run("an endpoint that leads to another cluster is IdentityChanged", f.anEndpointThatLeadsToAnotherClusterIsIdentityChanged)
	t.Run("at steady state the registry sees no writes", f.atSteadyStateTheRegistrySeesNoWrites)
	t.Run("nothing in status, events or logs holds a credential", f.nothingInStatusEventsOrLogsHoldsACredential)
}

// realMembers is what the subtests of TestHealthAgainstRealMembers share.
type realMembers struct {
	ctx          context.Context
	lf           *localfleet.Fleet
	registryKube *kubernetes.Clientset
	logs         *lockedBuffer
}

// everyMemberReachableWithItsVersionAndIdentity is the subtest "every member reachable, with its version and identity" of TestHealthAgainstRealMembers.
func (f *realMembers) everyMemberReachableWithItsVersionAndIdentity(t *testing.T) {
	ctx, lf := f.ctx, f.lf
	for _, m := range lf.Members {
		ns, err := kubernetes.NewForConfigOrDie(m.Config).CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		require.NoError(t, err)
		var c *v1alpha1.Cluster
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
			if _, c = ready(t, lf, m.Name); c.Status.ClusterID == string(ns.UID) {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s: clusterID %q, want %q", m.Name, c.Status.ClusterID, ns.UID)
		}
		cond := c.Status.Condition(v1alpha1.ConditionReady)
		require.Equal(t, metav1.ConditionTrue, cond.Status)
		require.Equal(t, v1alpha1.ReasonReachable, cond.Reason)
		require.Equal(t, m.Version, c.Status.Version)
		require.NotNil(t, c.Status.LastProbeTime)
	}
}

// aStoppedMemberIsUnreachableAndReachableAgainOnceBack is the subtest "a stopped member is Unreachable, and Reachable again once back" of TestHealthAgainstRealMembers.
func (f *realMembers) aStoppedMemberIsUnreachableAndReachableAgainOnceBack(t *testing.T) {
	lf, registryKube := f.lf, f.registryKube
	require.NoError(t, lf.Member("member-3").StopAPIServer())
	c := waitFor(t, lf, "member-3", "False/Unreachable")
	require.Contains(t, c.Status.Condition(v1alpha1.ConditionReady).Message, "connection refused")
	require.NoError(t, lf.Member("member-3").StartAPIServer())
	waitFor(t, lf, "member-3", "True/Reachable")
	requireEvent(t, registryKube, lf.Namespace, "member-3", "Unreachable")
	requireEvent(t, registryKube, lf.Namespace, "member-3", "Reachable")
}

// aRevokedTokenIsUnauthorized is the subtest "a revoked token is Unauthorized" of TestHealthAgainstRealMembers.
func (f *realMembers) aRevokedTokenIsUnauthorized(t *testing.T) {
	ctx, lf, registryKube := f.ctx, f.lf, f.registryKube
	secrets := registryKube.CoreV1().Secrets(lf.Namespace)
	s, err := secrets.Get(ctx, "member-1-token", metav1.GetOptions{})
	require.NoError(t, err)
	good := s.Data["token"]
	s.Data["token"] = []byte("revoked.token.value")
	s, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	c := waitFor(t, lf, "member-1", "False/Unauthorized")
	require.NotContains(t, fmt.Sprint(c.Status), "revoked.token.value")

	s.Data["token"] = good
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitFor(t, lf, "member-1", "True/Reachable")
}

// aDeletedSecretIsCredentialsUnavailableNamingTheProvider is the subtest "a deleted Secret is CredentialsUnavailable, naming the provider" of TestHealthAgainstRealMembers.
func (f *realMembers) aDeletedSecretIsCredentialsUnavailableNamingTheProvider(t *testing.T) {
	ctx, lf, registryKube := f.ctx, f.lf, f.registryKube
	secrets := registryKube.CoreV1().Secrets(lf.Namespace)
	s, err := secrets.Get(ctx, "member-2-kubeconfig", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, secrets.Delete(ctx, s.Name, metav1.DeleteOptions{}))
	c := waitFor(t, lf, "member-2", "False/CredentialsUnavailable")
	msg := c.Status.Condition(v1alpha1.ConditionReady).Message
	require.Contains(t, msg, "kubeconfig (kubeconfig-secret)")
	require.NotContains(t, msg, "BEGIN")

	s.ResourceVersion, s.UID = "", ""
	_, err = secrets.Create(ctx, s, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, lf, "member-2", "True/Reachable")
}

// aMemberWhoseEtcdIsFrozenIsNotReadyNamingTheCheck is the subtest "a member whose etcd is frozen is NotReady, naming the check" of TestHealthAgainstRealMembers.
func (f *realMembers) aMemberWhoseEtcdIsFrozenIsNotReadyNamingTheCheck(t *testing.T) {
	lf := f.lf
	require.NoError(t, lf.Member("member-3").PauseEtcd())
	c := waitFor(t, lf, "member-3", "False/NotReady")
	require.NoError(t, lf.Member("member-3").ResumeEtcd())
	require.Contains(t, c.Status.Condition(v1alpha1.ConditionReady).Message, "etcd")
	waitFor(t, lf, "member-3", "True/Reachable")
}

// aClusterWithNoEndpointForTheControllersNetworkIsNoEndpoint is the subtest "a Cluster with no endpoint for the controller's network is NoEndpoint" of TestHealthAgainstRealMembers.
func (f *realMembers) aClusterWithNoEndpointForTheControllersNetworkIsNoEndpoint(t *testing.T) {
	ctx, lf := f.ctx, f.lf
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	_, err := clusters.Create(ctx, &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"},
		Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
			{ClientCIDR: "10.0.0.0/8", ServerAddress: "https://10.1.2.3:6443"}}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	waitFor(t, lf, "elsewhere", "False/NoEndpoint")
	require.NoError(t, clusters.Delete(ctx, "elsewhere", metav1.DeleteOptions{}))
}

// anEndpointThatLeadsToAnotherClusterIsIdentityChanged is the subtest "an endpoint that leads to another cluster is IdentityChanged" of TestHealthAgainstRealMembers.
func (f *realMembers) anEndpointThatLeadsToAnotherClusterIsIdentityChanged(t *testing.T) {
	ctx, lf, registryKube := f.ctx, f.lf, f.registryKube
	_, before := ready(t, lf, "member-2")
	// member-2's credentials are a client certificate, which the new cluster accepts too.
	require.NoError(t, lf.Member("member-2").Reinstall())
	c := waitFor(t, lf, "member-2", "False/IdentityChanged")
	require.Equal(t, before.Status.ClusterID, c.Status.ClusterID, "the recorded identity is kept")
	requireEvent(t, registryKube, lf.Namespace, "member-2", "IdentityChanged")

	// Whoever knows the cluster was reinstalled accepts it by removing the recorded identity.
	_, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace).Patch(ctx, "member-2",
		types.JSONPatchType, []byte(`[{"op":"remove","path":"/status/clusterID"}]`), metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	c = waitFor(t, lf, "member-2", "True/Reachable")
	require.NotEqual(t, before.Status.ClusterID, c.Status.ClusterID)
	require.NotEmpty(t, c.Status.ClusterID)
}

// atSteadyStateTheRegistrySeesNoWrites is the subtest "at steady state the registry sees no writes" of TestHealthAgainstRealMembers.
func (f *realMembers) atSteadyStateTheRegistrySeesNoWrites(t *testing.T) {
	lf := f.lf
	for _, m := range lf.Members {
		waitFor(t, lf, m.Name, "True/Reachable")
	}
	versions := map[string]string{}
	for _, m := range lf.Members {
		_, c := ready(t, lf, m.Name)
		versions[m.Name] = c.ResourceVersion
	}
	time.Sleep(3 * time.Second) // ten probes of each member
	for _, m := range lf.Members {
		_, c := ready(t, lf, m.Name)
		require.Equal(t, versions[m.Name], c.ResourceVersion, "%s was written at steady state", m.Name)
	}
}

// nothingInStatusEventsOrLogsHoldsACredential is the subtest "nothing in status, events or logs holds a credential" of TestHealthAgainstRealMembers.
func (f *realMembers) nothingInStatusEventsOrLogsHoldsACredential(t *testing.T) {
	ctx, lf, registryKube, logs := f.ctx, f.lf, f.registryKube, f.logs
	events, err := registryKube.CoreV1().Events(lf.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	secrets, err := registryKube.CoreV1().Secrets(lf.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	clusters, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	seen := fmt.Sprint(events.Items) + fmt.Sprint(clusters.Items) + logs.String()
	require.Contains(t, logs.String(), "Ready changed", "the logs were not captured")
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if len(v) > 16 && k != "ca.crt" {
				require.NotContains(t, seen, string(v[len(v)/2:len(v)/2+12]), "Secret %s key %s leaked", s.Name, k)
			}
		}
	}
}

// requireEvent finds an Event on the Cluster with the reason.
func requireEvent(t *testing.T, kube kubernetes.Interface, ns, cluster, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		list, err := kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.Set{"involvedObject.name": cluster, "reason": reason}.String()})
		return err == nil && len(list.Items) > 0 && list.Items[0].Type == eventType(reason)
	}, 30*time.Second, 100*time.Millisecond, "no %s event on %s", reason, cluster)
}

func eventType(reason string) string {
	if reason == v1alpha1.ReasonReachable {
		return corev1.EventTypeNormal
	}
	return corev1.EventTypeWarning
}

// Two replicas: only the leader writes; when it stops, the other takes over within the lease.
func TestLeaderElectionFailover(t *testing.T) {
	lf := sharedSet(t, "member-1")
	ctx := t.Context()
	leases := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1().Leases(lf.Namespace)

	replica := func(name string, writes *atomic.Int64) (stop func()) {
		opts := fastOptions(lf)
		opts.Registry = versioned.NewForConfigOrDie(fleettest.CountClusterWrites(lf.Registry.Config, writes))
		opts.LeaderElection = &health.LeaderElection{Namespace: lf.Namespace, Identity: name,
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
		return start(t, opts)
	}
	holder := func() string {
		l, err := leases.Get(ctx, "clusterregistry-health", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	var writesA, writesB atomic.Int64
	stopA := replica("a", &writesA)
	require.Eventually(t, func() bool { return holder() == "a" }, 30*time.Second, 50*time.Millisecond)
	stopB := replica("b", &writesB)
	defer stopB()

	require.NoError(t, lf.Members[0].StopAPIServer())
	waitFor(t, lf, "member-1", "False/Unreachable")
	require.Positive(t, writesA.Load())
	require.Zero(t, writesB.Load(), "the replica that does not lead wrote")

	stopA()
	stopped := time.Now()
	require.Eventually(t, func() bool { return holder() == "b" }, 30*time.Second, 50*time.Millisecond)
	t.Logf("b took over %v after a stopped", time.Since(stopped))
	require.Less(t, time.Since(stopped), 3*time.Second, "takeover took longer than the lease duration")
	afterA := writesA.Load()

	require.NoError(t, lf.Members[0].StartAPIServer())
	waitFor(t, lf, "member-1", "True/Reachable")
	require.Positive(t, writesB.Load())
	require.Equal(t, afterA, writesA.Load(), "the stopped replica wrote")
}

// lockedBuffer collects log lines from the controller's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A controller that falls behind says so: with one probe at a time and two members that never
// answer, member-1 goes unprobed for longer than UnknownAfter, and its Ready turns Unknown,
// reason NotProbed, rather than standing stale.
func TestUnprobedMembersBecomeUnknown(t *testing.T) {
	lf := sharedSet(t, "member-1")
	ctx := t.Context()

	blackHole, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer blackHole.Close()
	go func() {
		for {
			conn, err := blackHole.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // accepted, never answered
		}
	}()
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	for _, name := range []string{"hole-1", "hole-2"} {
		_, err := clusters.Create(ctx, &v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: v1alpha1.ClusterSpec{
				KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
					{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://" + blackHole.Addr().String()}}},
				AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "static", Type: v1alpha1.AuthProviderType{Name: "static"}}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
		Providers: map[string]access.Provider{"static": access.ProviderFunc(
			func(context.Context, *access.Request) (*access.Credentials, error) {
				return &access.Credentials{BearerToken: "static-token-that-must-stay-home"}, nil
			})},
	})
	require.NoError(t, err)
	opts := fastOptions(lf)
	opts.Resolver = resolver
	opts.Concurrency = 1
	opts.Timeout = 2 * time.Second
	opts.UnknownAfter = time.Second
	stop := start(t, opts)
	defer stop()

	c := waitFor(t, lf, "member-1", "Unknown/NotProbed")
	require.Contains(t, c.Status.Condition(v1alpha1.ConditionReady).Message, "not probed for")
}

// With KeepConnections a probe over an open connection reads /readyz only; the version and the
// identity are read again when the connection is new. A cluster reinstalled behind the same
// endpoint drops the connection, so the next probe's new one finds the new identity.
func TestKeepConnectionsSeesAReinstalledCluster(t *testing.T) {
	realservers.Required(t)
	lf := localfleet.StartForTest(t, localfleet.Options{Members: 2})
	opts := fastOptions(lf)
	opts.KeepConnections = true
	stop := start(t, opts)
	defer stop()

	c := waitFor(t, lf, "member-2", "True/Reachable")
	for deadline := time.Now().Add(time.Minute); c.Status.ClusterID == ""; time.Sleep(50 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "member-2's clusterID was never recorded")
		_, c = ready(t, lf, "member-2")
	}
	// Probes over the open connection (the heartbeat, which also identifies, is an hour away).
	time.Sleep(5 * opts.Interval)
	waitFor(t, lf, "member-2", "True/Reachable")

	// member-2's credentials are a client certificate, which the new cluster accepts too.
	require.NoError(t, lf.Member("member-2").Reinstall())
	got := waitFor(t, lf, "member-2", "False/IdentityChanged")
	require.Equal(t, c.Status.ClusterID, got.Status.ClusterID, "the recorded identity is kept")
}

// Whoever answers at a Cluster's endpoint must not be able to freeze the status the registry
// shows: a version and identity longer than the schema allows, and a readyz answer naming ten
// thousand failing checks, still leave a status the real registry accepts. Nor can it redirect
// the probe, and its credentials, to a server of its own.
func TestHostileMemberCannotFreezeItsStatusNorRedirectItsProbes(t *testing.T) {
	lf := sharedSet(t)
	ctx := t.Context()
	var failing atomic.Bool
	var redirectTo atomic.Value // a URL, once the member starts redirecting its readyz
	mux := health.HostileAPIServer(&failing)
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to, _ := redirectTo.Load().(string); to != "" && r.URL.Path == "/readyz" {
			http.Redirect(w, r, to+"/readyz", http.StatusFound)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	defer hostile.Close()
	var harvested atomic.Int32
	harvester := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { harvested.Add(1) }))
	defer harvester.Close()

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	_, err := clusters.Create(ctx, &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: hostile.URL}},
				CABundle:        pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hostile.Certificate().Raw}),
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "static", Type: v1alpha1.AuthProviderType{Name: "static"}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	resolver, err := access.NewResolver(access.ResolverOptions{
		Providers: map[string]access.Provider{"static": access.ProviderFunc(
			func(context.Context, *access.Request) (*access.Credentials, error) {
				return &access.Credentials{BearerToken: "static-token-that-must-stay-home"}, nil
			})},
	})
	require.NoError(t, err)
	opts := fastOptions(lf)
	opts.Resolver = resolver
	stop := start(t, opts)
	defer stop()

	c := waitFor(t, lf, "hostile", "True/Reachable")
	require.Empty(t, c.Status.Version, "a version no API server would report")
	require.Empty(t, c.Status.ClusterID, "an identity no API server would report")

	failing.Store(true)
	c = waitFor(t, lf, "hostile", "False/NotReady")
	msg := c.Status.Condition(v1alpha1.ConditionReady).Message
	require.LessOrEqual(t, len(msg), 512)
	require.True(t, strings.HasPrefix(msg, "failing checks: check-0-é, check-1-é, "), msg)

	// Its readyz now redirects to a plain http server: the probe's token does not follow, and the
	// status says why the member is unreachable.
	failing.Store(false)
	redirectTo.Store(harvester.URL)
	c = waitFor(t, lf, "hostile", "False/Unreachable")
	msg = c.Status.Condition(v1alpha1.ConditionReady).Message
	require.Contains(t, msg, "refused to follow a 302 redirect from "+hostile.URL+" to "+harvester.URL)
	require.NotContains(t, msg, "static-token")
	require.Zero(t, harvested.Load(), "the harvester heard from the probe")
}
