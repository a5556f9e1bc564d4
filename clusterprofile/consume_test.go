package clusterprofile_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	cpv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	cpaccess "sigs.k8s.io/cluster-inventory-api/pkg/access"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterprofile"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// secretReader builds cluster-inventory-api's secretreader plugin and writes a provider file that
// maps the access provider name to it, reading the registry's default namespace; it stores there
// the token the plugin gives for clusterName.
func secretReader(t *testing.T, name, clusterName string, token []byte) *cpaccess.Config {
	t.Helper()
	dir := t.TempDir()
	plugin := filepath.Join(dir, "secretreader")
	out, err := exec.Command("go", "build", "-o", plugin, "sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin").CombinedOutput()
	require.NoError(t, err, "building cluster-inventory-api's secretreader plugin:\n%s", out)
	file, err := json.Marshal(map[string]any{"providers": []map[string]any{{
		"name": name,
		"execConfig": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "provideClusterInfo": true,
			"env": []map[string]string{{"name": "KUBECONFIG", "value": lf.Registry.Kubeconfig}},
		},
	}}})
	require.NoError(t, err)
	path := filepath.Join(dir, "clusterprofile-provider-file.json")
	require.NoError(t, os.WriteFile(path, file, 0o600))
	providers, err := cpaccess.NewFromFile(path)
	require.NoError(t, err)
	if token != nil {
		secrets := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(metav1.NamespaceDefault)
		_ = secrets.Delete(context.Background(), clusterName, metav1.DeleteOptions{})
		_, err = secrets.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: clusterName},
			Data: map[string][]byte{"token": token}}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = secrets.Delete(context.Background(), clusterName, metav1.DeleteOptions{}) })
	}
	return providers
}

// writeForeignProfile writes, with cluster-inventory-api's own clientset and types, a profile as
// another cluster manager would.
func writeForeignProfile(t *testing.T, ns, name, server string, ca []byte) {
	t.Helper()
	profiles := profilesClient().ApisV1alpha1().ClusterProfiles(ns)
	p, err := profiles.Create(context.Background(), &cpv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{cpv1alpha1.LabelClusterManagerKey: "open-cluster-management"}},
		Spec:       cpv1alpha1.ClusterProfileSpec{DisplayName: "managed by OCM", ClusterManager: cpv1alpha1.ClusterManager{Name: "open-cluster-management"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	p.Status = cpv1alpha1.ClusterProfileStatus{
		Conditions:      []metav1.Condition{{Type: cpv1alpha1.ClusterConditionControlPlaneHealthy, Status: metav1.ConditionTrue, Reason: "Healthy", LastTransitionTime: metav1.Now()}},
		Version:         cpv1alpha1.ClusterVersion{Kubernetes: "v1.36.3"},
		AccessProviders: []cpv1alpha1.AccessProvider{{Name: "ocm-token", Cluster: clientcmdv1.Cluster{Server: server, CertificateAuthorityData: ca}}},
	}
	_, err = profiles.UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func profileFleet(t *testing.T, ns string, providers *cpaccess.Config, sendTo access.ServerMatcher) *multicluster.Fleet {
	t.Helper()
	plugins, err := clusterprofile.ExecPlugins(providers, sendTo)
	require.NoError(t, err)
	resolver, err := access.NewResolver(access.ResolverOptions{ExecPlugins: plugins, ClientIP: netip.MustParseAddr("127.0.0.1")})
	require.NoError(t, err)
	fleet := multicluster.NewFleetFrom(clusterprofile.NewSource(profilesClient(), providers), resolver, multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(fleettest.Context(t, testTimeout)))
	t.Cleanup(fleet.Stop)
	return fleet
}

// A profile another cluster manager wrote, with cluster-inventory-api's own types, feeds a Fleet:
// its member is reached with the consumer's plugin (cluster-inventory-api's secretreader) as that
// project's access package would, and fan-out and the watch caches work over it.
func TestFleetOfForeignProfiles(t *testing.T) {
	fleetmain.Integration(t)
	m := lf.Members[0]
	ns := fleettest.CopySet(t, lf)
	token, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Get(context.Background(), m.Name+"-token", metav1.GetOptions{})
	require.NoError(t, err)
	providers := secretReader(t, "ocm-token", "edge-1", token.Data["token"])
	writeForeignProfile(t, ns, "edge-1", m.URL(), m.Config.CAData)

	fleet := profileFleet(t, ns, providers, access.Servers(m.URL()))
	require.Eventually(t, func() bool { return fleet.Len() == 1 }, testTimeout, 20*time.Millisecond)
	member := fleet.Member(ns, "edge-1")
	require.Equal(t, "managed by OCM", member.Cluster().Spec.DisplayName)
	require.True(t, member.Cluster().Status.Condition(v1alpha1.ConditionReady).Status == metav1.ConditionTrue)

	uids := multicluster.Map(fleettest.Context(t, testTimeout), fleet.Members(), func(ctx context.Context, m *multicluster.Member) (types.UID, error) {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return "", err
		}
		ns, err := kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return ns.UID, nil
	})
	require.NoError(t, uids.Err())

	caches := fleetcache.New(fleet)
	namespaces, err := fleetcache.Typed[*corev1.Namespace](caches, corev1.SchemeGroupVersion.WithResource("namespaces"), fleetcache.KindOptions{})
	require.NoError(t, err)
	require.NoError(t, caches.Start(fleettest.Context(t, testTimeout)))
	defer caches.Stop()
	require.NoError(t, namespaces.WaitForCacheSync(fleettest.Context(t, testTimeout), 30*time.Second))
	got, ok, err := namespaces.Get(member.Name(), "", "kube-system")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, uids[0].Value, got.UID)

	// The profile is deleted by its manager: the member leaves the Fleet.
	require.NoError(t, profilesClient().ApisV1alpha1().ClusterProfiles(ns).Delete(context.Background(), "edge-1", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return fleet.Len() == 0 }, testTimeout, 20*time.Millisecond)
}

// A profile's writer chooses its server, not where the consumer's credentials go: a profile that
// points at a server outside the plugins' SendTo is refused before the plugin runs, and that
// server hears nothing.
func TestForeignProfileCannotDrawCredentials(t *testing.T) {
	fleetmain.Integration(t)
	ns := fleettest.CopySet(t, lf)
	var asked atomic.Int64
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	defer hostile.Close()
	providers := secretReader(t, "ocm-token", "", nil)
	ca := pemOf(hostile)
	writeForeignProfile(t, ns, "evil", hostile.URL, ca)

	fleet := profileFleet(t, ns, providers, access.Servers(lf.Members[0].URL()))
	require.Eventually(t, func() bool { return fleet.Len() == 1 }, testTimeout, 20*time.Millisecond)
	res := multicluster.ForEach(fleettest.Context(t, testTimeout), fleet.Members(), func(ctx context.Context, m *multicluster.Member) error {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return err
		}
		_, err = kube.Discovery().ServerVersion()
		return err
	}, multicluster.NoRetry())
	var pinning *access.PinningError
	require.ErrorAs(t, res.Err(), &pinning)
	require.Zero(t, asked.Load(), "the hostile server was asked")
}

// ClusterOf reaches a profile as cluster-inventory-api's access package does: the first access
// provider, in the provider file's order, that the profile offers.
func TestClusterOf(t *testing.T) {
	providers := cpaccess.New([]cpaccess.Provider{
		{Name: "first", ExecConfig: &clientcmdapi.ExecConfig{Command: "/bin/first", APIVersion: "client.authentication.k8s.io/v1"}},
		{Name: "second", ExecConfig: &clientcmdapi.ExecConfig{Command: "/bin/second"}},
	})
	p := &cpv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: "inv", Name: "edge"}}
	p.Status.CredentialProviders = []cpv1alpha1.AccessProvider{{Name: "first", Cluster: clientcmdv1.Cluster{Server: "https://old.example:6443"}}}
	p.Status.AccessProviders = []cpv1alpha1.AccessProvider{
		{Name: "second", Cluster: clientcmdv1.Cluster{Server: "https://second.example:6443"}},
		{Name: "first", Cluster: clientcmdv1.Cluster{Server: "https://first.example:6443", CertificateAuthorityData: []byte("ca")}},
	}
	c := clusterprofile.ClusterOf(p, providers)
	require.Equal(t, "https://first.example:6443", c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress)
	require.Equal(t, []byte("ca"), c.Spec.KubernetesAPIEndpoints.CABundle)
	require.Equal(t, "/bin/first", c.Spec.AuthInfo.Providers[0].Config["command"])
	require.Equal(t, v1alpha1.ProviderTypeExec, c.Spec.AuthInfo.Providers[0].Type.Name)

	p.Status.AccessProviders = nil // only the deprecated field, whose "first" still counts
	require.Equal(t, "https://old.example:6443", clusterprofile.ClusterOf(p, providers).Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress)
	p.Status.CredentialProviders = []cpv1alpha1.AccessProvider{{Name: "unknown", Cluster: clientcmdv1.Cluster{Server: "https://x.example"}}}
	require.Empty(t, clusterprofile.ClusterOf(p, providers).Spec.KubernetesAPIEndpoints.ServerEndpoints)

	_, err := clusterprofile.ExecPlugins(providers, nil)
	require.ErrorContains(t, err, "sendTo")
}

func pemOf(s *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
}
