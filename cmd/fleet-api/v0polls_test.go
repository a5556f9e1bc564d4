package main

import (
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// countingConfig is config with every request it sends counted in n, watches apart: a watch
// is one request for as long as it lasts.
func countingConfig(config *rest.Config, n *atomic.Int64) *rest.Config {
	c := rest.CopyConfig(config)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.URL.Query().Get("watch") != "true" {
				n.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	return c
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// resourceRequests is how many requests for resources (not /metrics, not watches) a member's API
// server has answered, from its own metrics.
func resourceRequests(t *testing.T, member *rest.Config) int64 {
	t.Helper()
	raw, err := kubernetes.NewForConfigOrDie(member).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(testContext(t))
	require.NoError(t, err)
	var total int64
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "apiserver_request_total{") || strings.Contains(line, `resource=""`) || strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		fields := strings.Fields(line)
		n, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		require.NoError(t, err)
		total += int64(n)
	}
	return total
}

// Polling Optikon's lists, as each open UI does twice a second, asks nothing of the registry
// (beyond the caller's authorization, kept 10 s) nor of any member: 40 answers of each list
// sent no request to either.
func TestOptikonPollsAskNothing(t *testing.T) {
	needsFleet(t)
	var registry atomic.Int64
	_, web := startAPIOn(t, countingConfig(lf.Registry.Config, &registry), nil)
	poll := func() {
		for _, path := range []string{"/v0/clusters", "/v0/releases"} {
			code, body := call(t, http.MethodGet, web.URL+path, nil)
			require.Equal(t, http.StatusOK, code, string(body))
		}
	}
	poll() // the caller's authentication and authorization, kept for 10 s
	beforeRegistry := registry.Load()
	beforeMembers := []int64{resourceRequests(t, lf.Members[0].Config), resourceRequests(t, lf.Members[1].Config)}
	for range 40 {
		poll()
	}
	require.Zero(t, registry.Load()-beforeRegistry, "requests sent to the registry by 40 polls of both lists")
	for i, before := range beforeMembers {
		require.Equal(t, before, resourceRequests(t, lf.Members[i].Config), "requests member-%d answered during 40 polls", i+1)
	}
}
