package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/testcerts"
)

// freePort is a loopback port nothing listens on, for a server the command starts.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// registryToken is a token of a new service account of the registry, in namespace ns, that may get
// /metrics when scrape is true.
func registryToken(t *testing.T, lf *localfleet.Fleet, ns, name string, scrape bool) string {
	t.Helper()
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	if scrape {
		_, err = kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "metrics-reader"},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
		require.NoError(t, client.IgnoreAlreadyExists(err))
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "metrics-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	return tr.Status.Token
}

// controllers runs health and the rotator in one process on one Fleet, under one Lease, with one
// metrics endpoint that only callers the registry authenticates and allows may read, and one
// /healthz and /readyz; interrupted, it stops and gives the Lease up at once.
func TestControllersTogether(t *testing.T) {
	lf := sharedFleet(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	metricsPort, probePort := freePort(t), freePort(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "controllers", "--controllers", "health,rotation",
			"--leader-elect", "--interval", "300ms", "--failure-threshold", "1", "--success-threshold", "1",
			"--metrics-bind-address", "127.0.0.1:" + metricsPort, "--health-probe-bind-address", "127.0.0.1:" + probePort}, &logs, &logs)
	}()

	getAs := func(url, token string, certs ...tls.Certificate) (int, string) {
		return getOverTLS(t, url, token, certs...)
	}
	get := func(url, token string) (int, string) { return getAs(url, token) }
	require.Eventually(t, func() bool { code, _ := get("http://127.0.0.1:"+probePort+"/readyz", ""); return code == http.StatusOK },
		60*time.Second, 100*time.Millisecond, "never ready; logs:\n%s", logs.String())
	code, _ := get("http://127.0.0.1:"+probePort+"/healthz", "")
	require.Equal(t, http.StatusOK, code)

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	require.Eventually(t, func() bool {
		c, err := clusters.Get(t.Context(), "member-1", metav1.GetOptions{})
		return err == nil && c.Status.Condition(v1alpha1.ConditionReady) != nil && c.Status.LastProbeTime != nil
	}, 60*time.Second, 100*time.Millisecond, "no status written; logs:\n%s", logs.String())

	metrics := "https://127.0.0.1:" + metricsPort + "/metrics"
	// The metrics server starts beside the probes', not before them.
	var body string
	require.Eventually(t, func() bool { code, body = get(metrics, ""); return code != 0 }, 30*time.Second, 100*time.Millisecond, "metrics never served: %s", body)
	require.Equal(t, http.StatusUnauthorized, code, "metrics served to a caller with no credentials: %s\nlogs:\n%s", body, logs.String())
	code, _ = get(metrics, registryToken(t, lf, ns, "nosy", false))
	require.Equal(t, http.StatusForbidden, code, "metrics served to a caller the registry does not allow")
	code, body = get(metrics, registryToken(t, lf, ns, "scraper", true))
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, `clusterregistry_health_members{reason="Reachable"} 1`)

	// Client certificates, as the registry's own x509 authentication takes them (an admin's got
	// 401): one of the registry's CAs for a user allowed /metrics, and one it does not allow; a
	// certificate of another CA is nobody, whatever name it carries.
	certOf := func(user string, groups ...string) tls.Certificate {
		kubeconfig, err := lf.Registry.AddUser(user, groups...)
		require.NoError(t, err)
		cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
		require.NoError(t, err)
		pair, err := tls.X509KeyPair(cfg.CertData, cfg.KeyData)
		require.NoError(t, err)
		return pair
	}
	code, body = getAs(metrics, "", certOf("metrics-admin-"+ns, "system:masters"))
	require.Equal(t, http.StatusOK, code, "an admin's client certificate: %s", body)
	code, body = getAs(metrics, "", certOf("metrics-nosy-"+ns))
	require.Equal(t, http.StatusForbidden, code, "a client certificate of a user the registry does not allow: %s", body)
	strangerPEM, strangerKey := testcerts.ClientCertPEM("metrics-admin-" + ns)
	stranger, err := tls.X509KeyPair(strangerPEM, strangerKey)
	require.NoError(t, err)
	code, body = getAs(metrics, "", stranger)
	require.Equal(t, http.StatusUnauthorized, code, "a certificate no CA of the registry signed: %s", body)

	cancel()
	requireStopped(t, done, &logs)
	lease, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1().Leases(ns).Get(t.Context(), "clusterregistry-controllers", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "", "the Lease was not given up on stop: %v", lease.Spec.HolderIdentity)
}

// getOverTLS GETs url with a bearer token, if any, and client certificates, trusting any server
// certificate (the test's own servers sign their own): the status and body, or 0 and the error.
func getOverTLS(t *testing.T, url, token string, certs ...tls.Certificate) (int, string) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: certs}}} //nolint:gosec // the test's own self-signed server
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// deploy/controllers/deployment.yaml is what an API server takes (applied with kubectl, as a user
// would), and its container's arguments are the command's own flags.
func TestControllersDeployment(t *testing.T) {
	lf := sharedFleet(t)
	const manifest = "../../deploy/controllers/deployment.yaml"
	out, err := exec.CommandContext(t.Context(), lf.Kubectl, "--kubeconfig", lf.Registry.Kubeconfig, "apply", "-f", manifest).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "deployment.apps/clusterregistry-controllers created")

	d, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).AppsV1().Deployments("clusterregistry-system").Get(t.Context(), "clusterregistry-controllers", metav1.GetOptions{})
	require.NoError(t, err)
	args := d.Spec.Template.Spec.Containers[0].Args
	require.Equal(t, "controllers", args[0])
	var stdout, stderr syncBuffer
	require.Equal(t, 0, run(t.Context(), append(slices.Clone(args), "--help"), &stdout, &stderr), "the Deployment's arguments: %s", stderr.String())
}

// Two replicas with --shard-group divide the members: each has a Lease in the group, every
// member is probed and published as a ClusterProfile (each replica's publisher follows its own
// members, on the process's one Fleet); stopped, the Leases go, and the profiles stay.
func TestControllersSharded(t *testing.T) {
	lf := sharedFleet(t)
	require.NoError(t, fleettest.InstallClusterProfileCRD(t.Context(), lf.Registry.Config))
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(t.Context(), lf.Registry.Config))
	ns := fleettest.CopySet(t, lf)
	// Placements, divided among the replicas by the same hash: each decided by one of them.
	placements := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Placements(ns)
	for _, name := range []string{"web", "batch", "cache"} {
		_, err := placements.Create(t.Context(), &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs [2]syncBuffer
	done := make(chan int, 2)
	for i := range 2 {
		go func() {
			done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "controllers", "--controllers", "health,clusterprofiles,placements",
				"--shard-group", "probers", "--interval", "300ms", "--failure-threshold", "1", "--success-threshold", "1"}, &logs[i], &logs[i])
		}()
	}
	leases := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1().Leases(ns)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		list, err := leases.List(t.Context(), metav1.ListOptions{LabelSelector: shard.GroupLabel + "=probers"})
		if err == nil && len(list.Items) == 2 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the replicas have no Lease each; logs:\n%s\n%s", logs[0].String(), logs[1].String())
	}
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	for _, name := range []string{"member-1", "member-2"} {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			c, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
			if err == nil && c.Status.LastProbeTime != nil {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s never probed; logs:\n%s\n%s", name, logs[0].String(), logs[1].String())
		}
	}
	profiles := cpversioned.NewForConfigOrDie(lf.Registry.Config).ApisV1alpha1().ClusterProfiles(ns)
	for _, name := range []string{"member-1", "member-2"} {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			p, err := profiles.Get(t.Context(), name, metav1.GetOptions{})
			if err == nil && len(p.Status.Conditions) == 1 && p.Status.Conditions[0].Reason == v1alpha1.ReasonReachable {
				break
			}
			require.True(t, time.Now().Before(deadline), "%s has no ClusterProfile that says Reachable (%v); logs:\n%s\n%s", name, err, logs[0].String(), logs[1].String())
		}
	}
	for _, name := range []string{"web", "batch", "cache"} {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			p, err := placements.Get(t.Context(), name, metav1.GetOptions{})
			if err == nil && p.Status.ObservedGeneration == 1 && p.Status.Chosen == 2 {
				break
			}
			require.True(t, time.Now().Before(deadline), "Placement %s never decided; logs:\n%s\n%s", name, logs[0].String(), logs[1].String())
		}
	}
	require.Contains(t, logs[0].String()+logs[1].String(), `"shardGroup"="`+ns+`/probers as `)
	cancel()
	for range 2 {
		require.Equal(t, 0, <-done)
	}
	list, err := leases.List(t.Context(), metav1.ListOptions{LabelSelector: shard.GroupLabel + "=probers"})
	require.NoError(t, err)
	require.Empty(t, list.Items, "a stopped replica left its Lease")
	ps, err := profiles.List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, ps.Items, 2, "a replica that stopped deleted the profiles of the members it gave up")
}

// requireStopped waits for the command that was told to stop to exit 0, within its graceful
// stop and 10 s more.
func requireStopped(t *testing.T, done <-chan int, logs *syncBuffer) {
	t.Helper()
	select {
	case code := <-done:
		require.Equal(t, 0, code, logs.String())
	case <-time.After(gracefulStop + 10*time.Second):
		t.Fatalf("did not stop; logs:\n%s", logs.String())
	}
}
