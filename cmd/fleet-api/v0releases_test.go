package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// helloChart is a chart of one ConfigMap, at version.
func helloChart(t *testing.T, version string) []byte {
	t.Helper()
	b, err := chartrender.Package("hello", map[string]string{
		"Chart.yaml":          "apiVersion: v2\nname: hello\nversion: " + version + "\n",
		"templates/cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \"{{ .Release.Name }}-config\"}\ndata: {version: \"" + version + "\"}\n",
		"templates/NOTES.txt": "hello",
	})
	require.NoError(t, err)
	return b
}

// form is a multipart body as Optikon's UI sends it (FormData: name, chartTar, namespace).
func form(t *testing.T, fields map[string]string, chart []byte) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, k := range []string{"name", "namespace"} {
		if v, ok := fields[k]; ok {
			require.NoError(t, mw.WriteField(k, v))
		}
	}
	if chart != nil {
		part, err := mw.CreateFormFile("chartTar", "chart.tgz")
		require.NoError(t, err)
		_, err = part.Write(chart)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

// sendForm sends a form with token, answering the status and body.
func sendForm(t *testing.T, token, method, url, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// optikonSet is a cluster set of the fleet's two members, both labelled tier=edge, member-1
// region=east and member-2 region=west, with the placements and releases controllers running on fleet-api's
// Fleet of it.
func optikonSet(t *testing.T, origins ...string) (string, *server, string) {
	ctx := testContext(t)
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(ctx, lf.Registry.Config))
	ns := fleettest.CopySet(t, lf)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	for name, region := range map[string]string{"member-1": "east", "member-2": "west"} {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		c.Labels = map[string]string{"region": region, "tier": "edge"}
		c, err = clusters.Update(ctx, c, metav1.UpdateOptions{})
		require.NoError(t, err)
		c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReachable})
		_, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	s, web := startAPIWith(t, origins, ns)
	runControllers(t, s.fleet, ns)
	return ns, s, web.URL
}

// runControllers runs the placements and releases controllers of cluster set ns on fleet until
// the test ends.
func runControllers(t *testing.T, fleet *multicluster.Fleet, ns string) {
	registry := versioned.NewForConfigOrDie(lf.Registry.Config)
	decisions := cpversioned.NewForConfigOrDie(lf.Registry.Config)
	placements, err := scheduler.NewController(fleet, registry, decisions, scheduler.ControllerOptions{
		Options: scheduler.Options{SchedulerName: "clusterregistry", Logger: testr.New(t)}, Namespace: ns})
	require.NoError(t, err)
	releases, err := delivery.NewController(fleet, registry, kubernetes.NewForConfigOrDie(lf.Registry.Config), decisions,
		delivery.ControllerOptions{Namespace: ns, RetryAfter: time.Second})
	require.NoError(t, err)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = placements.Run(ctx); done <- struct{}{} }()
	go func() { _ = releases.Run(ctx); done <- struct{}{} }()
	t.Cleanup(func() { stop(); <-done; <-done })
}

// listOptikon is GET /v0/releases[?labels=] as the operator.
func listOptikon(t *testing.T, url string) []optikon.Release {
	t.Helper()
	code, body := call(t, http.MethodGet, url, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var out []optikon.Release
	require.NoError(t, json.Unmarshal(body, &out))
	return out
}

// Optikon's /v0/releases against real members, as its UI uses it: a chart uploaded for the
// region=east clusters is installed by Helm there alone, listed per cluster with its revision,
// upgraded (revision 2), removed from east's clusters, then deleted; every step checked on the
// members themselves.
func TestOptikonReleases(t *testing.T) {
	needsFleet(t)
	ns, s, base := optikonSet(t)
	east := kubernetes.NewForConfigOrDie(lf.Members[0].Config)
	west := kubernetes.NewForConfigOrDie(lf.Members[1].Config)
	hostileHelmRecord(t, s, west)

	ct, body := form(t, map[string]string{"name": "hello", "namespace": "optikon-apps"}, helloChart(t, "0.1.0"))
	code, answer := sendForm(t, operatorToken, http.MethodPost, base+"/v0/releases?labels=region=east", ct, body)
	requireAPIResponse(t, code, answer, http.StatusCreated, "release hello of chart hello")
	installed := func(version int, chart string) bool {
		got := listOptikon(t, base+"/v0/releases")
		return len(got) == 1 && got[0].OnCluster == "member-1" && got[0].Version == version && got[0].Chart.Metadata.Version == chart &&
			got[0].Info.Status.Code == "DEPLOYED" && got[0].Namespace == "optikon-apps"
	}
	require.Eventually(t, func() bool { return installed(1, "0.1.0") }, 90*time.Second, 200*time.Millisecond, "hello on member-1 at revision 1: %v", listOptikon(t, base+"/v0/releases"))
	cm, err := east.CoreV1().ConfigMaps("optikon-apps").Get(testContext(t), "hello-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "0.1.0", cm.Data["version"])
	_, err = west.CoreV1().Namespaces().Get(testContext(t), "optikon-apps", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "member-2 (region=west) got the release's namespace: %v", err)
	require.Empty(t, listOptikon(t, base+"/v0/releases?labels=region=west"))
	code, answer = call(t, http.MethodGet, base+"/v0/releases/hello", nil)
	require.Equal(t, http.StatusOK, code, string(answer))
	var one optikon.Release
	require.NoError(t, json.Unmarshal(answer, &one))
	require.Equal(t, "member-1", one.OnCluster)
	require.Equal(t, 1, one.Version)
	code, answer = call(t, http.MethodGet, base+"/v0/releases/hello?labels=region=west", nil)
	requireAPIResponse(t, code, answer, http.StatusNotFound, `installed on no cluster that labels "region=west" selects`)
	ct, body = form(t, map[string]string{}, helloChart(t, "0.2.0"))
	code, answer = sendForm(t, operatorToken, http.MethodPut, base+"/v0/releases/hello?labels=region=west", ct, body)
	requireAPIResponse(t, code, answer, http.StatusBadRequest, `an upgrade of the clusters "region=west" selects alone is not done`)

	ct, body = form(t, map[string]string{}, helloChart(t, "0.2.0"))
	code, answer = sendForm(t, operatorToken, http.MethodPut, base+"/v0/releases/hello", ct, body)
	requireAPIResponse(t, code, answer, http.StatusOK, "release hello upgraded")
	require.Eventually(t, func() bool { return installed(2, "0.2.0") }, 90*time.Second, 200*time.Millisecond, "hello on member-1 at revision 2")
	secrets, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).List(testContext(t), metav1.ListOptions{LabelSelector: optikon.ReleaseLabel + "=hello"})
	require.NoError(t, err)
	require.Len(t, secrets.Items, 1, "the chart Secrets kept after an upgrade")
	upgradeKeepsOthersSecrets(t, ns, base)

	everywhere(t, ns, base, east, west)
	code, answer = call(t, http.MethodDelete, base+"/v0/releases/hello?labels=region=east", nil)
	requireAPIResponse(t, code, answer, http.StatusOK, "release hello deleted from member-1")
	gone(t, east, "hello")
	secrets, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).List(testContext(t), metav1.ListOptions{LabelSelector: optikon.ReleaseLabel + "=hello"})
	require.NoError(t, err)
	require.Empty(t, secrets.Items, "the chart Secrets of a release removed from its last cluster")
	optikonReleaseErrors(t, ns, base)
}

// everywhere: a release made without labels goes to every cluster; DELETE with region=west's
// labels removes it from member-2 alone; DELETE without labels removes it everywhere.
func everywhere(t *testing.T, ns, base string, east, west kubernetes.Interface) {
	ct, body := form(t, map[string]string{"name": "both", "namespace": "optikon-apps"}, helloChart(t, "0.3.0"))
	code, answer := sendForm(t, operatorToken, http.MethodPost, base+"/v0/releases", ct, body)
	requireAPIResponse(t, code, answer, http.StatusCreated, "release both")
	on := func(clusters ...string) bool {
		var got []string
		for _, r := range listOptikon(t, base+"/v0/releases") {
			if r.Name == "both" && r.Info.Status.Code == "DEPLOYED" {
				got = append(got, r.OnCluster)
			}
		}
		return slices.Equal(got, clusters)
	}
	require.Eventually(t, func() bool { return on("member-1", "member-2") }, 90*time.Second, 200*time.Millisecond, "both on both clusters")
	code, answer = call(t, http.MethodDelete, base+"/v0/releases/both?labels=region=west", nil)
	requireAPIResponse(t, code, answer, http.StatusOK, "release both deleted from member-2")
	gone(t, west, "both")
	require.Eventually(t, func() bool { return on("member-1") }, 30*time.Second, 200*time.Millisecond, "both on member-1 alone")
	_, err := east.CoreV1().ConfigMaps("optikon-apps").Get(testContext(t), "both-config", metav1.GetOptions{})
	require.NoError(t, err, "member-1 lost its objects when member-2 left")
	code, answer = call(t, http.MethodDelete, base+"/v0/releases/both", nil)
	requireAPIResponse(t, code, answer, http.StatusOK, "release both deleted from every cluster")
	_, err = versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Placements(ns).Get(testContext(t), optikon.PlacementName("both"), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "both's Placement after DELETE: %v", err)
}

// gone waits until release's Helm storage has left member, as `helm uninstall` leaves it.
func gone(t *testing.T, member kubernetes.Interface, release string) {
	t.Helper()
	require.Eventually(t, func() bool {
		list, err := member.CoreV1().Secrets("optikon-apps").List(testContext(t), metav1.ListOptions{LabelSelector: "owner=helm,name=" + release})
		return err == nil && len(list.Items) == 0
	}, 90*time.Second, 200*time.Millisecond, "release %s uninstalled", release)
}

// upgradeKeepsOthersSecrets: a Release that someone pointed, with the registry's API, at a Secret
// of their own keeps that Secret when PUT upgrades it: only a Secret an Optikon call made is
// deleted after an upgrade.
func upgradeKeepsOthersSecrets(t *testing.T, ns, base string) {
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Releases(ns)
	secrets := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns)
	_, err := secrets.Create(testContext(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "precious"},
		Data: map[string][]byte{"chart.tgz": helloChart(t, "0.2.0")}}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The delivery controller writes hello's status meanwhile, so a Get then Update may
	// conflict, as it would for any user: retry as kubectl edit's users do.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rel, err := registry.Get(testContext(t), "hello", metav1.GetOptions{})
		if err != nil {
			return err
		}
		rel.Spec.Source.Chart.Secret.Name = "precious"
		_, err = registry.Update(testContext(t), rel, metav1.UpdateOptions{})
		return err
	})
	require.NoError(t, err)
	ct, body := form(t, map[string]string{}, helloChart(t, "0.2.0"))
	code, answer := sendForm(t, operatorToken, http.MethodPut, base+"/v0/releases/hello", ct, body)
	requireAPIResponse(t, code, answer, http.StatusOK, "release hello upgraded")
	_, err = secrets.Get(testContext(t), "precious", metav1.GetOptions{})
	require.NoError(t, err, "an upgrade deleted a Secret it did not make")
}

// hostileHelmRecord: a member may answer anything as Helm's storage. A record that unzips to
// 20 MiB, on member-2, reaches fleet-api's cache with nothing of it kept, and costs no answer.
func hostileHelmRecord(t *testing.T, s *server, member kubernetes.Interface) {
	var zipped bytes.Buffer
	gz := gzip.NewWriter(&zipped)
	_, err := gz.Write(append([]byte(`{"name":"ghost","config":{"x":"`), make([]byte, 20<<20)...))
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	_, err = member.CoreV1().Secrets("default").Create(testContext(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.ghost.v1",
		Labels: map[string]string{"owner": "helm", "name": "ghost"}}, Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(zipped.Bytes()))}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = member.CoreV1().Secrets("default").Delete(context.Background(), "sh.helm.release.v1.ghost.v1", metav1.DeleteOptions{})
	})
	m2 := types.NamespacedName{Namespace: s.namespaces[0], Name: "member-2"}
	require.Eventually(t, func() bool {
		got, _ := s.helm.List(m2, labels.SelectorFromSet(labels.Set{"name": "ghost"}))
		return len(got) == 1
	}, 30*time.Second, 100*time.Millisecond, "the hostile record in fleet-api's cache")
	got, _ := s.helm.List(m2, labels.SelectorFromSet(labels.Set{"name": "ghost"}))
	require.Nil(t, got[0].Data, "a member's 20 MiB record kept in the cache")
	require.Empty(t, got[0].Annotations, "a summary kept of a record that does not decode")
}

// tarGz is a gzipped tar of the given entries.
func tarGz(t *testing.T, entries map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, data := range entries {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}))
		_, err := tw.Write(data)
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// optikonReleaseErrors: what is wrong with a request gets the contract's APIResponse naming it,
// and a POST that fails part way leaves nothing behind.
func optikonReleaseErrors(t *testing.T, ns, base string) {
	chartYAML := []byte("apiVersion: v2\nname: bomb\nversion: 0.1.0\n")
	bomb := tarGz(t, map[string][]byte{"bomb/Chart.yaml": chartYAML, "bomb/templates/big.yaml": make([]byte, 20<<20)})
	escape := tarGz(t, map[string][]byte{"evil/Chart.yaml": chartYAML, "evil/../../etc/evil.yaml": []byte("x: 1")})
	good := helloChart(t, "0.1.0")
	names := map[string]string{"name": "x", "namespace": "apps"}
	for _, c := range []struct {
		what   string
		query  string
		fields map[string]string
		chart  []byte
		says   string
	}{
		{"no chartTar", "", names, nil, "chartTar is required"},
		{"not a chart", "", names, []byte("just some bytes"), "chartTar is not a chart Helm can install: not a packaged chart"},
		{"a tar bomb", "", names, bomb, "unpacks to more than"},
		{"a path out of the chart", "", names, escape, "chartTar is not a chart Helm can install"},
		{"too large", "", names, bytes.Repeat([]byte{1}, optikon.MaxChartUpload+1), "larger than"},
		{"a name that is not a DNS label", "", map[string]string{"name": "Hello_World", "namespace": "apps"}, good, `name "Hello_World"`},
		{"no namespace", "", map[string]string{"name": "x"}, good, `namespace ""`},
		{"bad labels", "?labels=region%3D%3Deast%3D", names, good, "is not a label selector"},
	} {
		ct, body := form(t, c.fields, c.chart)
		code, answer := sendForm(t, operatorToken, http.MethodPost, base+"/v0/releases"+c.query, ct, body)
		requireAPIResponse(t, code, answer, http.StatusBadRequest, c.says)
	}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		code, answer := call(t, method, base+"/v0/releases/nosuch", nil)
		requireAPIResponse(t, code, answer, http.StatusNotFound, `"nosuch" not found`)
	}
	ct, body := form(t, map[string]string{}, good)
	code, answer := sendForm(t, operatorToken, http.MethodPut, base+"/v0/releases/nosuch", ct, body)
	requireAPIResponse(t, code, answer, http.StatusNotFound, `"nosuch" not found`)

	// A caller who may make the chart's Secret and the Placement but not the Release: the POST
	// fails at the Release, and what it made first is gone.
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.RbacV1().Roles(ns).Create(testContext(t), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "half"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "delete"}},
		{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"placements"}, Verbs: []string{"create", "delete"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	half, err := caller(testContext(t), "half-"+ns, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "half"}, ns)
	require.NoError(t, err)
	ct, body = form(t, map[string]string{"name": "partial", "namespace": "apps"}, good)
	code, answer = sendForm(t, half, http.MethodPost, base+"/v0/releases", ct, body)
	requireAPIResponse(t, code, answer, http.StatusForbidden, `its Release partial: releases.clusterregistry.k8s.io is forbidden`)
	left, err := kube.CoreV1().Secrets(ns).List(testContext(t), metav1.ListOptions{LabelSelector: optikon.ReleaseLabel + "=partial"})
	require.NoError(t, err)
	require.Empty(t, left.Items, "the chart's Secret of a POST that failed")
	_, err = versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Placements(ns).Get(testContext(t), optikon.PlacementName("partial"), metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Placement of a POST that failed: %v", err)
}
