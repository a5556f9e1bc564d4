package tunnel_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/tunnel"
)

// The publisher gives a tunnelled member's ClusterProfile an access provider whose proxy-url goes
// through the consumers' tunnel-proxy, and a consumer that follows the profile (its server, CA and
// proxy, with a credential of its own) reads the member in its own network. Without
// TunnelProxy, the profile offers no way in: its server is one only the member's network reaches.
func TestClusterProfileThroughTheTunnel(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	r.tunnelledMember(t, ns, memberAddress(t))
	proxy := listen(t)

	without := publish(t, ns, r, "")
	require.Empty(t, without.Status.AccessProviders, "a tunnelled member's profile offered a server no consumer can dial")
	got := publish(t, ns, r, proxy.Addr().String())
	require.Len(t, got.Status.AccessProviders, 1)
	offered := got.Status.AccessProviders[0].Cluster
	require.Equal(t, tunnel.ProxyURL(proxy.Addr().String(), ns, "member-1"), offered.ProxyURL)
	require.Equal(t, lf.Members[0].URL(), offered.Server)

	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	serve := &http.Server{Handler: &tunnel.Proxy{Dialer: r.dialer(), Cluster: func(ctx context.Context, ns, name string) (*v1alpha1.Cluster, error) {
		return clusters.Clusters(ns).Get(ctx, name, metav1.GetOptions{})
	}}}
	go func() { _ = serve.Serve(proxy) }()
	t.Cleanup(func() { _ = serve.Close() })
	proxyURL, err := url.Parse(offered.ProxyURL)
	require.NoError(t, err)
	consumer := &rest.Config{Host: offered.Server, BearerToken: memberToken(t, ns), Proxy: http.ProxyURL(proxyURL),
		TLSClientConfig: rest.TLSClientConfig{CAData: offered.CertificateAuthorityData, ServerName: offered.TLSServerName}}
	_, err = kubernetes.NewForConfigOrDie(consumer).CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err, "the profile's way in did not reach the member")
}

// publish runs a Publisher of ns, reaching members through r, until member-1's profile is
// written, and returns it; the profile is deleted again, for the next publish to write anew.
func publish(t *testing.T, ns string, r *rig, tunnelProxy string) *cpv1alpha1.ClusterProfile {
	t.Helper()
	ctx, cancel := context.WithCancel(fleettest.Context(t, time.Minute))
	profiles := cpversioned.NewForConfigOrDie(lf.Registry.Config).ApisV1alpha1().ClusterProfiles(ns)
	p, err := clusterprofile.NewPublisher(versioned.NewForConfigOrDie(lf.Registry.Config), cpversioned.NewForConfigOrDie(lf.Registry.Config),
		clusterprofile.PublishOptions{Namespaces: []string{ns}, Resolver: resolverFor(t, r.dialer()), TunnelProxy: tunnelProxy})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var got *cpv1alpha1.ClusterProfile
	require.Eventually(t, func() bool {
		got, err = profiles.Get(ctx, "member-1", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "no profile of member-1 was published")
	cancel()
	require.NoError(t, <-done)
	require.NoError(t, profiles.Delete(context.Background(), "member-1", metav1.DeleteOptions{}))
	return got
}
