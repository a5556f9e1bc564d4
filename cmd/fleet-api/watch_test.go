package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// watch opens GET /watch/clusters as the caller of token, and returns its events as they come.
func watch(t *testing.T, token, url string) (<-chan watchEvent, int) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, url, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	events := make(chan watchEvent, 100)
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		close(events)
		return events, resp.StatusCode
	}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(events)
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			var e watchEvent
			if json.Unmarshal(lines.Bytes(), &e) == nil {
				events <- e
			}
		}
	}()
	return events, resp.StatusCode
}

// next is the next event that is not a bookmark, within timeout.
func next(t *testing.T, events <-chan watchEvent, timeout time.Duration) watchEvent {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case e, ok := <-events:
			require.True(t, ok, "the stream ended")
			if e.Type != eventBookmark {
				return e
			}
		case <-deadline:
			t.Fatalf("no event within %s", timeout)
		}
	}
}

// GET /watch/clusters streams what GET /clusters answers, and its changes, as the caller may see
// them: a viewer of one set gets that set's members and their changes, never another set's; a
// stream resumes from a revision that a list or an event gave; a revision no longer kept is 410.
func TestWatchClusters(t *testing.T) {
	needsFleet(t)
	ctx := testContext(t)
	other := fleettest.CopySet(t, lf, "member-2")
	viewer, err := caller(ctx, "watch-viewer", clusterRole(t, lf.Namespace, "clusters-watch-viewer", "get", "list", "watch"), lf.Namespace)
	require.NoError(t, err)
	_, web := startAPI(t, lf.Namespace, other)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()

	_, code := watch(t, "", web.URL+"/watch/clusters")
	require.Equal(t, http.StatusUnauthorized, code)

	code, body := callAs(t, viewer, http.MethodGet, web.URL+"/clusters", nil, nil)
	require.Equal(t, http.StatusOK, code, string(body))
	var list struct {
		ResourceVersion string `json:"resourceVersion"`
	}
	require.NoError(t, json.Unmarshal(body, &list))
	listedAt, err := strconv.ParseUint(list.ResourceVersion, 10, 64)
	require.NoError(t, err)

	events, code := watch(t, viewer, web.URL+"/watch/clusters")
	require.Equal(t, http.StatusOK, code)
	seen := map[types.NamespacedName]bool{}
	for range lf.Members {
		e := next(t, events, 10*time.Second)
		require.Equal(t, eventAdded, e.Type)
		require.Equal(t, lf.Namespace, e.Cluster.Namespace, "a member of a set the viewer may not list")
		seen[types.NamespacedName{Namespace: e.Cluster.Namespace, Name: e.Cluster.Name}] = true
	}
	require.Len(t, seen, len(lf.Members))

	// A change in another set is not sent; one in the viewer's set is, within a poll or two.
	for _, ns := range []string{other, lf.Namespace} {
		_, err := registry.Clusters(ns).Patch(ctx, "member-2", types.MergePatchType, []byte(`{"spec":{"displayName":"Watched `+ns+`"}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	// Other changes (a cache's state, say) may come first; none is of the other set.
	untilRenamed(t, lf.Namespace, events)

	// Nothing changes now: whatever comes (a cache's state may still turn), no event repeats
	// what the stream last said of its member. Every member was sent again every 500 ms.
	requireNoRepeats(t, events, 3*time.Second)

	// A selector's watch: a member that gains the label is ADDED, one that loses it DELETED.
	gold, code := watch(t, viewer, web.URL+"/watch/clusters?labelSelector=tier%3Dgold")
	require.Equal(t, http.StatusOK, code)
	relabel := func(patch string) {
		_, err := registry.Clusters(lf.Namespace).Patch(ctx, "member-2", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	relabel(`{"metadata":{"labels":{"tier":"gold"}}}`)
	e := next(t, gold, 10*time.Second)
	require.Equal(t, eventAdded, e.Type, "%+v", e)
	require.Equal(t, "member-2", e.Cluster.Name)
	relabel(`{"metadata":{"labels":{"tier":null}}}`)
	for {
		e = next(t, gold, 10*time.Second)
		require.Equal(t, "member-2", e.Cluster.Name, "a member outside the selection: %+v", e)
		if e.Type != eventModified {
			break
		}
	}
	require.Equal(t, eventDeleted, e.Type, "%+v", e)

	// Resumed from the list's revision: the change is replayed.
	resumed, code := watch(t, viewer, web.URL+"/watch/clusters?resourceVersion="+strconv.FormatUint(listedAt, 10))
	require.Equal(t, http.StatusOK, code)
	untilRenamed(t, lf.Namespace, resumed)

	_, code = watch(t, viewer, web.URL+"/watch/clusters?resourceVersion=999999999")
	require.Equal(t, http.StatusGone, code)
	_, code = watch(t, viewer, web.URL+"/watch/clusters?resourceVersion=yesterday")
	require.Equal(t, http.StatusBadRequest, code)
}

// untilRenamed reads events until member-2 of ns is MODIFIED to its display name "Watched ns".
// Other changes (a cache's state, say) may come first; none may be of another set.
func untilRenamed(t *testing.T, ns string, events <-chan watchEvent) {
	t.Helper()
	for {
		e := next(t, events, 10*time.Second)
		require.Equal(t, ns, e.Cluster.Namespace, "an event of a set the viewer may not list: %+v", e)
		if e.Type == eventModified && e.Cluster.Name == "member-2" && e.Cluster.DisplayName == "Watched "+ns {
			return
		}
	}
}

// requireNoRepeats reads events for the while given: none may be a MODIFIED that repeats what
// the stream last said of its member.
func requireNoRepeats(t *testing.T, events <-chan watchEvent, while time.Duration) {
	t.Helper()
	last := map[string]clusterSummary{}
	for quiet := time.After(while); ; {
		select {
		case e := <-events:
			if e.Type != eventModified {
				continue
			}
			if prev, ok := last[e.Cluster.Name]; ok {
				require.False(t, reflect.DeepEqual(prev, *e.Cluster), "a MODIFIED that changes nothing: %+v", e.Cluster)
			}
			last[e.Cluster.Name] = *e.Cluster
			continue
		case <-quiet:
		}
		break
	}
}
