package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// polled is one answer to a GET of a polled list, as a client that keeps the last ETag sees it.
type polled struct {
	code int
	etag string
	body []byte
	gzip bool
}

// poll GETs path as token with the headers given; the transport's own gzip is off, so what the
// server sends is what is seen.
func poll(t *testing.T, token, url string, header http.Header) polled {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := polled{code: resp.StatusCode, etag: resp.Header.Get("ETag"), body: body, gzip: resp.Header.Get("Content-Encoding") == "gzip"}
	if out.gzip {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		require.NoError(t, err)
		out.body, err = io.ReadAll(zr)
		require.NoError(t, err)
	}
	return out
}

// The lists a UI polls cost what changed: polls of an unchanged fleet are sent the same answer
// under the same ETag, computed once, and a poll that sends that ETag is answered 304; a change
// in the registry (a Cluster's annotation) or on a member (a Pod) shows in the next answers; and a
// caller who may see fewer cluster sets is never sent the answer computed for one who sees more.
func TestPolledListsCostWhatChanged(t *testing.T) {
	needsFleet(t)
	ctx := testContext(t)
	set, other := fleettest.CopySet(t, lf), fleettest.CopySet(t, lf, "member-2")
	s, web := startAPIAs(t, apiOptions{config: lf.Registry.Config, sets: []string{set, other}, optikonSet: set})
	routes := []string{"/v0/clusters", "/v0/releases", "/clusters"}
	etags := map[string]string{}
	for _, path := range routes {
		first := poll(t, operatorToken, web.URL+path, nil)
		require.Equal(t, http.StatusOK, first.code, "%s: %s", path, first.body)
		require.NotEmpty(t, first.etag, path)
		etags[path] = first.etag
	}

	// Unchanged: ten polls of each, over more than two of the feed's intervals, compute nothing.
	computed := s.answers.Computed()
	for range 10 {
		for _, path := range routes {
			again := poll(t, operatorToken, web.URL+path, nil)
			require.Equal(t, etags[path], again.etag, "%s: an unchanged fleet's answer changed: %s", path, again.body)
			revalidated := poll(t, operatorToken, web.URL+path, http.Header{"If-None-Match": {etags[path]}})
			require.Equal(t, http.StatusNotModified, revalidated.code, path)
			require.Empty(t, revalidated.body)
		}
		time.Sleep(time.Second / 8)
	}
	require.Equal(t, computed, s.answers.Computed(), "answers of an unchanged fleet were computed again")
	zipped := poll(t, operatorToken, web.URL+"/v0/clusters", http.Header{"Accept-Encoding": {"gzip"}})
	require.True(t, zipped.gzip)
	require.Equal(t, "W/"+etags["/v0/clusters"], zipped.etag)
	require.True(t, json.Valid(zipped.body))

	// A change in the registry shows in the next answers.
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(set)
	_, err := registry.Patch(ctx, "member-2", types.MergePatchType, []byte(`{"metadata":{"annotations":{"Lat":"52.52"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	etag, list := requireChanged(t, web.URL, etags["/v0/clusters"], func(list []v1alpha1.Cluster) bool {
		return list[1].Annotations["Lat"] == "52.52" // Optikon's, in no summary
	})

	// A change on a member: its Pods' count.
	pods := kubernetes.NewForConfigOrDie(lf.Members[0].Config).CoreV1().Pods("default")
	_, err = pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "polled"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), "polled", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	had, err := strconv.Atoi(list[0].Annotations[optikon.AnnotationNumPods])
	require.NoError(t, err)
	requireChanged(t, web.URL, etag, func(list []v1alpha1.Cluster) bool {
		return list[0].Annotations[optikon.AnnotationNumPods] == strconv.Itoa(had+1)
	})

	// The operator sees both sets; a caller who may list Clusters in one is sent that set's.
	operator := poll(t, operatorToken, web.URL+"/clusters", nil)
	require.ElementsMatch(t, []string{set + "/member-1", set + "/member-2", other + "/member-2"}, summaryNames(t, operator.body))
	one, err := caller(ctx, "poller-of-one-set", clusterRole(t, set, "poller", "get", "list"), set)
	require.NoError(t, err)
	narrower := poll(t, one, web.URL+"/clusters", http.Header{"If-None-Match": {operator.etag}})
	require.Equal(t, http.StatusOK, narrower.code, "a caller of one set was told the operator's answer is current: %s", narrower.body)
	require.ElementsMatch(t, []string{set + "/member-1", set + "/member-2"}, summaryNames(t, narrower.body))
}

// requireChanged polls /v0/clusters with the last ETag until it is sent a new answer that
// satisfies ok, and returns its ETag and Clusters.
func requireChanged(t *testing.T, url, last string, ok func([]v1alpha1.Cluster) bool) (string, []v1alpha1.Cluster) {
	t.Helper()
	var got polled
	var list []v1alpha1.Cluster
	require.Eventually(t, func() bool {
		got = poll(t, operatorToken, url+"/v0/clusters", http.Header{"If-None-Match": {last}})
		if got.code != http.StatusOK {
			return false
		}
		list = nil
		require.NoError(t, json.Unmarshal(got.body, &list))
		return len(list) == 2 && ok(list)
	}, 30*time.Second, 50*time.Millisecond, "the change did not show in the answers")
	require.NotEqual(t, last, got.etag)
	return got.etag, list
}

func summaryNames(t *testing.T, body []byte) []string {
	t.Helper()
	var list clusterList
	require.NoError(t, json.Unmarshal(body, &list), string(body))
	var out []string
	for _, c := range list.Clusters {
		out = append(out, c.Namespace+"/"+c.Name)
	}
	return out
}
