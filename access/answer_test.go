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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A member, or whatever answers at its address, that answers a list without end makes a client
// hold as much as it sends: with MaxAnswerBytes, every client built from the Resolved's Config
// stops reading there, and a watch, a stream meant to last, is read whole.
func TestMaxAnswerBytes(t *testing.T) {
	const limit = 1 << 20
	event := func(i int) string {
		return fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"default","resourceVersion":"%d"},"data":{"x":"%s"}}}`+"\n",
			i, i+1, strings.Repeat("x", 4000))
	}
	events := 3 * limit / len(event(0)) // a watch three times as long as the bound
	var written atomic.Int64
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
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
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
