package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/join"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// lf is the package's local fleet, shared by its tests.
var lf *localfleet.Fleet

// needsFleet skips a test under -short, when no local fleet runs.
func needsFleet(t *testing.T) {
	t.Helper()
	realservers.Required(t)
}

func TestMain(m *testing.M) {
	// The benchmarks' simulated members run in child processes of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 2}, func(*localfleet.Fleet) error {
		if err := populate(); err != nil {
			return err
		}
		var err error
		operatorToken, err = caller(context.Background(), "operator", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}, "")
		return err
	})
}

// operatorToken is a token of an administrator of the registry, whom the existing tests call as.
var operatorToken string

// callers is the namespace of the registry that holds the tests' callers' service accounts.
const callers = "fleet-api-callers"

// caller makes a service account name in the registry bound to role (cluster-wide when namespace
// is empty, else in namespace), and returns a token of it.
func caller(ctx context.Context, name string, role rbacv1.RoleRef, namespace string) (string, error) {
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: callers}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	if _, err := kube.CoreV1().ServiceAccounts(callers).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: callers}}
	var err error
	if namespace == "" {
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: callers + "-" + name}, RoleRef: role, Subjects: subjects}, metav1.CreateOptions{})
	} else {
		_, err = kube.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: callers + "-" + name}, RoleRef: role, Subjects: subjects}, metav1.CreateOptions{})
	}
	if err != nil {
		return "", err
	}
	tr, err := kube.CoreV1().ServiceAccounts(callers).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// populate gives member-1 two nodes (one ready) and a ready Deployment, and member-2 one ready
// node; nothing runs pods in a local fleet, so their status is written as a kubelet and the
// Deployment controller would.
func populate() error {
	ctx := context.Background()
	for i, names := range [][]string{{"node-a", "node-b"}, {"node-c"}} {
		kube := kubernetes.NewForConfigOrDie(lf.Members[i].Config)
		for _, name := range names {
			n, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			ready := corev1.ConditionTrue
			if name == "node-b" {
				ready = corev1.ConditionFalse
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
			n.Status.NodeInfo.KubeletVersion = "v1.36.3"
			if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}
	kube := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	labels := map[string]string{"app": "web"}
	d, err := kube.AppsV1().Deployments("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 2, ReadyReplicas: 2}
	_, err = kube.AppsV1().Deployments("default").UpdateStatus(ctx, d, metav1.UpdateOptions{})
	return err
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startAPI serves the API on the local fleet's cluster sets (its own when none is named), until
// the end of the test.
func startAPI(t *testing.T, sets ...string) (*server, *httptest.Server) {
	t.Helper()
	return startAPIWith(t, nil, sets...)
}

// startAPIWith is startAPI letting pages of origins call it (--cors-allowed-origin).
func startAPIWith(t *testing.T, origins []string, sets ...string) (*server, *httptest.Server) {
	t.Helper()
	return startAPIOn(t, lf.Registry.Config, origins, sets...)
}

// startAPIOn is startAPIWith reaching the registry with config.
func startAPIOn(t *testing.T, config *rest.Config, origins []string, sets ...string) (*server, *httptest.Server) {
	t.Helper()
	if len(sets) == 0 {
		sets = []string{lf.Namespace}
	}
	return startAPIAs(t, apiOptions{config: config, origins: origins, sets: sets})
}

// apiOptions say how startAPIAs runs the API: reaching the registry with config, serving sets
// (every set when empty: -A), /v0 serving optikonSet (--optikon-cluster-set), and letting pages
// of origins call it.
type apiOptions struct {
	config     *rest.Config
	sets       []string
	optikonSet string
	origins    []string
}

// startAPIAs serves the API as opts say, until the end of the test.
func startAPIAs(t *testing.T, opts apiOptions) (*server, *httptest.Server) {
	t.Helper()
	config := opts.config
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(config))})
	require.NoError(t, err)
	s, err := startServer(testContext(t), versioned.NewForConfigOrDie(config), resolver, opts.sets)
	require.NoError(t, err)
	s.optikonSet = opts.optikonSet
	t.Cleanup(s.stop)
	if len(opts.sets) > 0 {
		// Every set (-A) holds other tests' members too, some of which refuse on purpose: their
		// caches never sync, and such a test waits on what it asks about instead.
		require.NoError(t, s.nodes.WaitForCacheSync(testContext(t), 30*time.Second))
		require.NoError(t, s.deployments.WaitForCacheSync(testContext(t), 30*time.Second))
	}
	web := httptest.NewUnstartedServer(nil)
	g, err := newGuard(config, nil, servedHosts(web.Listener.Addr(), nil))
	require.NoError(t, err)
	require.NoError(t, g.allowOrigins(opts.origins))
	web.Config.Handler = s.routes(g)
	web.Start()
	t.Cleanup(web.Close)
	return s, web
}

func nodesOf(total, ready int) nodeCounts { return nodeCounts{Total: &total, Ready: &ready} }

func deploymentsOf(total, ready int) workloads {
	return workloads{Deployments: &total, DeploymentsReady: &ready}
}

type clusterList struct {
	Clusters []clusterSummary `json:"clusters"`
}

// call sends a request as the operator, an administrator of the registry.
func call(t *testing.T, method, url string, body any) (int, []byte) {
	t.Helper()
	return callAs(t, operatorToken, method, url, body, nil)
}

// callAs sends a request with token (none when empty) and the headers given, and returns the
// answer, which is JSON whatever it says.
func callAs(t *testing.T, token, method, url string, body any, header http.Header) (int, []byte) {
	t.Helper()
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		in = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(testContext(t), method, url, in)
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	return resp.StatusCode, out
}

func listClusters(t *testing.T, web *httptest.Server) map[string]clusterSummary {
	t.Helper()
	code, body := call(t, http.MethodGet, web.URL+"/clusters", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var list clusterList
	require.NoError(t, json.Unmarshal(body, &list))
	out := map[string]clusterSummary{}
	for _, c := range list.Clusters {
		out[c.Name] = c
	}
	return out
}

// status decodes a Kubernetes Status.
func status(t *testing.T, body []byte) metav1.Status {
	t.Helper()
	var st metav1.Status
	require.NoError(t, json.Unmarshal(body, &st), string(body))
	require.Equal(t, "Status", st.Kind)
	return st
}

func TestClusters(t *testing.T) {
	needsFleet(t)
	ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, fleetmain.IgnoreIdleConnections...)
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	_, web := startAPI(t)

	clusters := listClusters(t, web)
	require.Len(t, clusters, 2)
	m1, m2 := clusters["member-1"], clusters["member-2"]
	require.Equal(t, nodesOf(2, 1), m1.Nodes)
	require.Equal(t, deploymentsOf(1, 1), m1.Workloads)
	require.Equal(t, nodesOf(1, 1), m2.Nodes)
	require.Equal(t, deploymentsOf(0, 0), m2.Workloads, "a member with no Deployments has zero, not unknown")
	require.Equal(t, nodesOf(0, 0), m2.Pods, "a member with no Pods has zero, not unknown")
	// A Pod that no kubelet runs (these members run none) counts, not Ready.
	pods := kubernetes.NewForConfigOrDie(lf.Members[1].Config).CoreV1().Pods("default")
	_, err := pods.Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "waiting"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), "waiting", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	require.Eventually(t, func() bool { return listClusters(t, web)["member-2"].Pods.same(nodesOf(1, 0)) }, 30*time.Second, 50*time.Millisecond,
		"the member's Pod is not counted")
	for _, c := range []clusterSummary{m1, m2} {
		require.Equal(t, "True", c.Ready)
		require.Equal(t, localfleet.KubernetesVersion, c.Version)
		require.Equal(t, "Synced", c.Cache.State)
		require.False(t, c.Cache.Since.IsZero())
	}

	code, body := call(t, http.MethodGet, web.URL+"/clusters/"+lf.Namespace+"/member-1", nil)
	require.Equal(t, http.StatusOK, code)
	var detail clusterDetail
	require.NoError(t, json.Unmarshal(body, &detail))
	require.Equal(t, []nodeInfo{{Name: "node-a", Ready: true, KubeletVersion: "v1.36.3"}, {Name: "node-b", KubeletVersion: "v1.36.3"}}, detail.NodeList)
	require.Equal(t, []deploymentInfo{{Namespace: "default", Name: "web", Replicas: 2, ReadyReplicas: 2, Ready: true}}, detail.DeploymentList)

	code, body = call(t, http.MethodGet, web.URL+"/clusters/"+lf.Namespace+"/nobody", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, metav1.StatusReasonNotFound, status(t, body).Reason)

	// ?labelSelector= and ?fieldSelector= choose as the registry would (they were ignored); a
	// field it does not serve, or a selector that does not parse, is 400 naming it.
	for query, want := range map[string][]string{
		"labelSelector=fleet%3Dlocal":                        {"member-1", "member-2"},
		"labelSelector=fleet%3Delsewhere":                    nil,
		"fieldSelector=metadata.name%3Dmember-1":             {"member-1"},
		"fieldSelector=metadata.name!%3Dmember-1":            {"member-2"},
		"fieldSelector=metadata.namespace%3D" + lf.Namespace: {"member-1", "member-2"},
	} {
		code, body := call(t, http.MethodGet, web.URL+"/clusters?"+query, nil)
		require.Equal(t, http.StatusOK, code, "%s: %s", query, body)
		var list clusterList
		require.NoError(t, json.Unmarshal(body, &list))
		var got []string
		for _, c := range list.Clusters {
			got = append(got, c.Name)
		}
		require.ElementsMatch(t, want, got, query)
	}
	code, body = call(t, http.MethodGet, web.URL+"/clusters?fieldSelector=spec.displayName%3Dx", nil)
	require.Equal(t, http.StatusBadRequest, code, string(body))
	require.Contains(t, status(t, body).Message, "field label not supported: spec.displayName")
	code, body = call(t, http.MethodGet, web.URL+"/watch/clusters?labelSelector=a%3D%3D%3Db", nil)
	require.Equal(t, http.StatusBadRequest, code, string(body))
	require.Contains(t, status(t, body).Message, "labelSelector")
}

func TestRegisterAndRemove(t *testing.T) {
	needsFleet(t)
	s, web := startAPI(t)
	cluster := func(name, server string) map[string]any {
		return map[string]any{
			"apiVersion": "clusterregistry.k8s.io/v1alpha1", "kind": "Cluster",
			"metadata": map[string]any{"name": name, "namespace": lf.Namespace},
			"spec": map[string]any{"kubernetesApiEndpoints": map[string]any{
				"serverEndpoints": []any{map[string]any{"clientCIDR": "0.0.0.0/0", "serverAddress": server}},
			}},
		}
	}

	// Refused before the registry is asked, every problem named by its field.
	code, body := call(t, http.MethodPost, web.URL+"/clusters", cluster("Bad_Name", "http://plain.example.com"))
	require.Equal(t, http.StatusUnprocessableEntity, code, string(body))
	st := status(t, body)
	require.Equal(t, metav1.StatusReasonInvalid, st.Reason)
	var fields []string
	for _, c := range st.Details.Causes {
		fields = append(fields, c.Field)
	}
	require.Contains(t, fields, "metadata.name")
	require.Contains(t, fields, "spec.kubernetesApiEndpoints.serverEndpoints[0].serverAddress")

	noNamespace := cluster("extra", "https://127.0.0.1:1")
	delete(noNamespace["metadata"].(map[string]any), "namespace")
	code, body = call(t, http.MethodPost, web.URL+"/clusters", noNamespace)
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, status(t, body).Message, "metadata.namespace is required")
	code, body = call(t, http.MethodPost, web.URL+"/clusters", map[string]any{"spec": map[string]any{"what": 1}})
	require.Equal(t, http.StatusBadRequest, code)
	require.Contains(t, status(t, body).Message, "unknown field")

	code, body = call(t, http.MethodPost, web.URL+"/clusters", cluster("extra", "https://127.0.0.1:1"))
	require.Equal(t, http.StatusCreated, code, string(body))
	code, body = call(t, http.MethodPost, web.URL+"/clusters", cluster("extra", "https://127.0.0.1:1"))
	require.Equal(t, http.StatusConflict, code)
	require.Equal(t, metav1.StatusReasonAlreadyExists, status(t, body).Reason)
	require.Eventually(t, func() bool { return s.fleet.Len() == 3 }, 10*time.Second, 20*time.Millisecond)
	extra := listClusters(t, web)["extra"]
	require.Equal(t, "Syncing", extra.Cache.State, "a member that cannot be reached is not shown as empty")
	require.Nil(t, extra.Nodes.Total, "a member that cannot be reached has an unknown count of Nodes, not zero")
	require.Contains(t, extra.Nodes.Unknown, "not listed yet")

	code, body = call(t, http.MethodDelete, web.URL+"/clusters/"+lf.Namespace+"/extra", nil)
	require.Equal(t, http.StatusOK, code, string(body))
	require.Equal(t, metav1.StatusSuccess, status(t, body).Status)
	code, body = call(t, http.MethodDelete, web.URL+"/clusters/"+lf.Namespace+"/extra", nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Equal(t, metav1.StatusReasonNotFound, status(t, body).Reason)
	require.Eventually(t, func() bool { return s.fleet.Len() == 2 }, 10*time.Second, 20*time.Millisecond)
}

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "nowhere"}, `--listen "nowhere"`},
		{[]string{"--sync-timeout", "0s"}, "--sync-timeout 0s"},
		{[]string{"stray"}, `unknown command "stray"`},
		{[]string{"--allow-exec", "aws eks get-token"}, "--allow-exec"},
		{[]string{"--listen", "0.0.0.0:8080"}, "without TLS, only a loopback address"},
		{[]string{"--listen", "192.0.2.1:8080"}, "without TLS, only a loopback address"},
		{[]string{"--client-ca-file", "ca.pem"}, "--client-ca-file needs TLS"},
		{[]string{"--tls-cert-file", "tls.crt"}, "go together"},
		{[]string{"--self-signed", "--tls-cert-file", "tls.crt", "--tls-private-key-file", "tls.key"}, "conflict"},
		{[]string{"-n", "fleet", "--optikon-cluster-set", "edge"}, "--optikon-cluster-set edge: this server serves cluster set fleet alone"},
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 2, run(context.Background(), tc.args, &stdout, &stderr), "%q", tc.args)
		require.Contains(t, stderr.String(), tc.want, "%q", tc.args)
	}
}

// The command serves from the registry its kubeconfig names; a member that stops is shown as
// stale since then, with the counts it had, not as empty, and current again once it is back.
func TestStoppedMemberIsStale(t *testing.T) {
	needsFleet(t)
	ctx, cancel := context.WithCancel(testContext(t))
	out, w := io.Pipe()
	done := make(chan int, 1) // run may return before serving; the pipe is closed then
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace, "--listen", "127.0.0.1:0"}, w, &stderr)
		w.Close()
	}()
	lines := bufio.NewScanner(out)
	var url string
	for lines.Scan() {
		if _, addr, ok := strings.Cut(lines.Text(), "serving 2 members on "); ok {
			url = addr
			break
		}
	}
	require.NotEmpty(t, url, "stderr: %s", stderr.String())
	go func() { _, _ = io.Copy(io.Discard, out) }()
	web := &httptest.Server{URL: url}

	require.Equal(t, "Synced", listClusters(t, web)["member-2"].Cache.State)
	stoppedAt := time.Now()
	require.NoError(t, lf.Members[1].StopAPIServer()) // killed, as in an outage
	restarted := false
	defer func() {
		if !restarted {
			_ = lf.Members[1].StartAPIServer()
		}
	}()
	var m2 clusterSummary
	require.Eventually(t, func() bool {
		m2 = listClusters(t, web)["member-2"]
		return m2.Cache.State == "Stale"
	}, 30*time.Second, 50*time.Millisecond)
	require.WithinDuration(t, stoppedAt, m2.Cache.Since, 10*time.Second)
	require.NotEmpty(t, m2.Cache.Error)
	require.Equal(t, nodesOf(1, 1), m2.Nodes, "the counts of before, not an empty list")
	require.Equal(t, "Synced", listClusters(t, web)["member-1"].Cache.State)

	require.NoError(t, lf.Members[1].StartAPIServer())
	restarted = true
	require.Eventually(t, func() bool { return listClusters(t, web)["member-2"].Cache.State == "Synced" }, 60*time.Second, 50*time.Millisecond)

	cancel()
	require.Equal(t, 0, <-done, "stderr: %s", stderr.String())
}

// A member whose credentials may not list Nodes (joined with the view role) is not waited for
// until the sync timeout, and its Node counts are unknown, saying why, not zero; what it may list
// is counted. Before, fleet-api waited the whole timeout and answered "nodes": {"total": 0}.
func TestCountsTheMemberRefuses(t *testing.T) {
	needsFleet(t)
	ctx := testContext(t)
	ns := fleettest.NewSet(t, lf)
	reg, err := join.RegistryFor(lf.Registry.Config, ns)
	require.NoError(t, err)
	_, err = join.Join(ctx, lf.Members[0].Config, reg, join.Options{Name: "viewer", ClusterRole: "view"})
	require.NoError(t, err)

	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config))})
	require.NoError(t, err)
	s, err := startServer(ctx, versioned.NewForConfigOrDie(lf.Registry.Config), resolver, []string{ns})
	require.NoError(t, err)
	t.Cleanup(s.stop)
	start := time.Now()
	err = s.nodes.WaitForCacheSync(ctx, 30*time.Second)
	var notSynced *fleetcache.NotSyncedError
	require.ErrorAs(t, err, &notSynced)
	require.Less(t, time.Since(start), 10*time.Second, "waited for a member that refuses to list Nodes")
	require.Contains(t, err.Error(), "forbidden")
	require.NoError(t, s.deployments.WaitForCacheSync(ctx, 30*time.Second))

	summary, _, _ := s.summarize(s.fleet.Member(ns, "viewer"))
	require.Nil(t, summary.Nodes.Total, "an unknown count of Nodes shown as a number")
	require.Contains(t, summary.Nodes.NotPermitted, "the member's account may not list nodes")
	require.Contains(t, summary.Nodes.NotPermitted, "--cluster-role", "what would permit it")
	require.Empty(t, summary.Nodes.Unknown, "said twice")
	require.Equal(t, deploymentsOf(1, 1), summary.Workloads)
	// A refusal is a settled answer: the member is Synced for what it allows, with no error
	// beside (it showed "Syncing since ..." for good, the refusal repeated in the Caches column).
	require.Equal(t, cacheState{State: "Synced", Since: summary.Cache.Since}, summary.Cache)
	data, err := json.Marshal(summary.Nodes)
	require.NoError(t, err)
	require.NotContains(t, string(data), `"total"`)
}

// --help and doc.go name every route the server has (GET /releases was missing from --help
// once), and doc.go names no route it does not have; --help exits 0.
func TestHelpNamesEveryRoute(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"--help"}, &stdout, &stderr), stderr.String())
	for _, route := range []string{"body: a Cluster as JSON", "JSON merge patch"} {
		require.Contains(t, stdout.String(), route)
	}
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	documented := regexp.MustCompile(`(?m)^//\t([A-Z]+) +(/\S*)`).FindAllStringSubmatch(string(doc), -1)
	var routes, inDoc []string
	named := func(method, path string) {
		require.Contains(t, stdout.String(), fmt.Sprintf("%-7s%s", method, path), "--help does not name the route")
		routes = append(routes, method+" "+path)
	}
	for _, r := range apiRoutes {
		named(r.Method, r.Path+r.Query)
	}
	for _, r := range optikon.Routes {
		named(r.Method, r.Path+r.Query)
	}
	for _, d := range documented {
		inDoc = append(inDoc, d[1]+" "+d[2])
	}
	require.ElementsMatch(t, routes, inDoc, "doc.go's routes are not the server's")
}
