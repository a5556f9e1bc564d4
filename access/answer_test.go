package access

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// A member, or whatever answers at its address, that answers a list without end makes a client
// hold as much as it sends: with MaxAnswerBytes, every client built from the Resolved's Config
// stops reading there. A watch, a stream meant to last, is read whole however long, but not one
// of its events past the bound.
func TestMaxAnswerBytes(t *testing.T) {
	const limit = 1 << 20
	event := func(i int) string {
		return fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"default","resourceVersion":"%d"},"data":{"x":"%s"}}}`+"\n",
			i, i+1, strings.Repeat("x", 4000))
	}
	events := 3 * limit / len(event(0)) // a watch three times as long as the bound
	var written atomic.Int64
	hostile := endlessAnswers(t, events, event, &written)

	root := t.TempDir()
	path := filepath.Join(root, "token")
	require.NoError(t, os.WriteFile(path, []byte("a-token"), 0o600))
	_, err := NewResolver(ResolverOptions{MaxAnswerBytes: -1})
	require.ErrorContains(t, err, "ResolverOptions.MaxAnswerBytes is -1")
	r, err := NewResolver(ResolverOptions{
		FileRoots:      []FileRoot{{Dir: root, SendTo: Servers(hostile.URL)}},
		MaxAnswerBytes: limit,
		ClientIP:       testClientIP,
	})
	require.NoError(t, err)
	ctx := testContext(t)
	a, err := r.Resolve(ctx, offlineCluster("endless", hostile.URL, (&fakeMember{Server: hostile}).caPEM(),
		provider("p", v1alpha1.ProviderTypeTokenFile, map[string]string{"path": path})))
	require.NoError(t, err)

	for name, kube := range map[string]kubernetes.Interface{
		"on the Resolved's HTTPClient": kubernetes.NewForConfigOrDie(a.Config), // its own transport, from the Config
		"on the shared HTTPClient":     must(kubernetes.NewForConfigAndClient(a.Config, a.HTTPClient)),
	} {
		written.Store(0)
		_, err = kube.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		require.ErrorIs(t, err, ErrAnswerTooLarge, name)
		require.ErrorContains(t, err, "the answer exceeds 1024 KiB", name)
		require.Less(t, written.Load(), int64(32<<20), "%s: the endless answer was read on", name)

		w, err := kube.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err, name)
		seen := 0
		for range w.ResultChan() {
			seen++
		}
		require.Equal(t, events, seen, "%s: the watch was cut short", name)

		// A watch whose one event never ends is cut there: the watch ends with an error event.
		written.Store(0)
		w, err = kube.CoreV1().ConfigMaps("endless").Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err, name)
		var got []watch.Event
		for e := range w.ResultChan() {
			got = append(got, e)
		}
		require.Len(t, got, 1, name)
		require.Equal(t, watch.Error, got[0].Type, name)
		require.Contains(t, apierrors.FromObject(got[0].Object).Error(), "a watch event exceeds 1024 KiB", name)
		require.Less(t, written.Load(), int64(32<<20), "%s: the endless event was read on", name)
	}
}

// endlessAnswers is a member whose answers have no end: a list without end, a watch of events
// (a watch of namespace "endless": one event without end); written counts what it sent of those
// without end.
func endlessAnswers(t *testing.T, events int, event func(int) string, written *atomic.Int64) *httptest.Server {
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") == "true" && strings.Contains(r.URL.Path, "/namespaces/endless/") {
			// One event without end.
			_, _ = io.WriteString(w, `{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm"},"data":{"x":"`)
			for {
				n, err := io.WriteString(w, strings.Repeat("x", 4000))
				written.Add(int64(n))
				if err != nil {
					return // the client hung up
				}
			}
		}
		if r.URL.Query().Get("watch") == "true" {
			for i := range events {
				if _, err := io.WriteString(w, event(i)); err != nil {
					return
				}
			}
			return
		}
		_, _ = io.WriteString(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[`)
		for i := 0; ; i++ { // without end
			n, err := io.WriteString(w, fmt.Sprintf(`{"metadata":{"name":"cm-%d"},"data":{"x":"%s"}},`, i, strings.Repeat("x", 4000)))
			written.Add(int64(n))
			if err != nil {
				return // the client hung up
			}
		}
	}))
	t.Cleanup(hostile.Close)
	return hostile
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// On a real member, the bound passes what an API server writes, in JSON and in protobuf: a watch
// far longer than the bound in events under it, each whole. It stops a list past the bound, and a
// watch at its first event past the bound.
func TestMaxAnswerBytesOnARealMember(t *testing.T) {
	realservers.Required(t)
	const limit = 64 << 10
	ctx := testContext(t)
	ns := fleetmain.Namespace(t, registry)
	memberNS := fleetmain.Namespace(t, member)
	putSecret(t, ns, "creds", pinnedTo(member.URL()), map[string][]byte{"token": []byte(memberToken(t, memberNS, "reader"))})
	c := memberCluster(t, ns, "bounded", provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "creds"}))
	a, err := newResolver(t, ResolverOptions{MaxAnswerBytes: limit}).Resolve(ctx, c)
	require.NoError(t, err)
	clients := map[string]kubernetes.Interface{}
	for _, contentType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		cfg := rest.CopyConfig(a.Config)
		cfg.ContentType, cfg.AcceptContentTypes = contentType, contentType
		clients[contentType] = must(kubernetes.NewForConfigAndClient(cfg, a.HTTPClient))
	}
	watches := map[string]watch.Interface{}
	for name, kube := range clients {
		w, err := kube.CoreV1().ConfigMaps(memberNS).Watch(ctx, metav1.ListOptions{})
		require.NoError(t, err, name)
		defer w.Stop()
		watches[name] = w
	}

	admin := kubeClient(t, member).CoreV1().ConfigMaps(memberNS)
	put := func(name string, size int) {
		_, err := admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name},
			Data: map[string]string{"x": strings.Repeat("x", size)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	const count = 6 // 180 KiB in all, in events of 30 KiB
	for i := range count {
		put(fmt.Sprintf("cm-%d", i), 30<<10)
	}
	for name, w := range watches {
		for i := range count {
			e := <-w.ResultChan()
			require.Equal(t, watch.Added, e.Type, "%s: event %d", name, i)
			require.Equal(t, fmt.Sprintf("cm-%d", i), e.Object.(*corev1.ConfigMap).Name, name)
		}
		_, err = clients[name].CoreV1().ConfigMaps(memberNS).List(ctx, metav1.ListOptions{})
		require.ErrorIs(t, err, ErrAnswerTooLarge, "%s: a list of 180 KiB", name)
	}

	put("large", 100<<10)
	for name, w := range watches {
		e, open := <-w.ResultChan()
		require.True(t, open, name)
		require.Equal(t, watch.Error, e.Type, "%s: an event of 100 KiB", name)
		require.Contains(t, apierrors.FromObject(e.Object).Error(), "a watch event exceeds 64 KiB", name)
	}
}
