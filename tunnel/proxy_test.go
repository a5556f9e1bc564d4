package tunnel_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/tunnel"
)

// countingDialer counts the dials the Proxy makes, and makes none.
type countingDialer struct{ dials atomic.Int32 }

func (d *countingDialer) DialContext(context.Context, string, string) (net.Conn, error) {
	d.dials.Add(1)
	return nil, errors.New("not dialled in this test")
}

// The local proxy opens the tunnel only for a CONNECT that names a tunnelled Cluster and asks for
// that Cluster's own API server address: nothing else reaches the tunnel.
func TestTheProxyOpensOnlyTheMembersAPIServer(t *testing.T) {
	clusters := map[string]*v1alpha1.Cluster{
		"fleet/edge":   {ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "edge"}},
		"fleet/direct": {ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "direct"}},
	}
	for _, c := range clusters {
		c.Spec.KubernetesAPIEndpoints.ServerEndpoints = []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://10.0.0.5:6443"}}
	}
	clusters["fleet/edge"].Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{Agent: "edge-agent"}
	dialer := &countingDialer{}
	proxy := httptest.NewServer(&tunnel.Proxy{Dialer: dialer, Cluster: func(_ context.Context, ns, name string) (*v1alpha1.Cluster, error) {
		if c, ok := clusters[ns+"/"+name]; ok {
			return c, nil
		}
		return nil, fmt.Errorf("no cluster %s/%s", ns, name)
	}})
	t.Cleanup(proxy.Close)
	connect := func(target, user string) (int, string) {
		c, err := net.Dial("tcp", proxy.Listener.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		auth := ""
		if user != "" {
			auth = "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(user+":")) + "\r\n"
		}
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, target, auth)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&body)
		return resp.StatusCode, body.String()
	}
	for _, tc := range []struct {
		target, user string
		status       int
		says         string
	}{
		{"10.0.0.5:6443", "", http.StatusProxyAuthRequired, "name the Cluster"},
		{"10.0.0.5:22", "fleet/edge", http.StatusForbidden, "is not its API server"},
		{"10.0.0.6:6443", "fleet/edge", http.StatusForbidden, "is not its API server"},
		{"10.0.0.5:6443", "fleet/direct", http.StatusForbidden, "dialled directly"},
		{"10.0.0.5:6443", "fleet/nosuch", http.StatusBadGateway, "no cluster fleet/nosuch"},
	} {
		status, body := connect(tc.target, tc.user)
		require.Equal(t, tc.status, status, "CONNECT %s as %q: %s", tc.target, tc.user, body)
		require.Contains(t, body, tc.says)
	}
	require.Zero(t, dialer.dials.Load(), "a refused CONNECT reached the tunnel")
	status, body := connect("10.0.0.5:6443", "fleet/edge")
	require.Equal(t, http.StatusBadGateway, status, body)
	require.EqualValues(t, 1, dialer.dials.Load(), "the member's own API server was not dialled through the tunnel")

	resp, err := http.Get(proxy.URL + "/api")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "a plain request (a browser's) was not refused")
}
