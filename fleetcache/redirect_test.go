package fleetcache

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A member, or whatever answers at its address, that redirects the caches' lists and watches to
// another server gets nothing sent there: the caches' requests go through the member's pinned
// transport, whatever client follows the redirect. The member's status says why, and never the
// token.
func TestRedirectingMemberGetsNoCredentials(t *testing.T) {
	ns := newTestSet(t, false)
	const token = "pinned-token-that-must-stay-home"
	var mu sync.Mutex
	var caught []string
	catcher := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		caught = append(caught, r.URL.String()+" Authorization="+r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer catcher.Close()
	hostile := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, catcher.URL+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	}))
	defer hostile.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hostile.Certificate().Raw})

	ctx := testContext(t)
	_, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile-token", Annotations: map[string]string{v1alpha1.ServersAnnotation: hostile.URL}},
		Data:       map[string][]byte{"token": []byte(token)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns).Create(ctx, &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: hostile.URL}},
				CABundle:        ca,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token",
				Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": "hostile-token"}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	c := New(startFleet(t, ns))
	cms, err := Typed[*corev1.ConfigMap](c, configMaps, KindOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Start(ctx))
	defer c.Stop()
	hostileKey := types.NamespacedName{Namespace: ns, Name: "hostile"}
	var st Status
	require.Eventually(t, func() bool {
		st, _ = cms.Status(hostileKey)
		return st.Err != nil
	}, 20*time.Second, 20*time.Millisecond)
	var off *access.OffServerError
	require.ErrorAs(t, st.Err, &off, "%v", st.Err)
	require.Equal(t, Syncing, st.State)
	require.NotContains(t, st.String(), token)
	// The other members sync as ever.
	err = cms.WaitForCacheSync(ctx, 5*time.Second)
	var notSynced *NotSyncedError
	require.ErrorAs(t, err, &notSynced)
	require.Len(t, notSynced.Members, 1)
	require.Contains(t, notSynced.Members, hostileKey)
	require.NotContains(t, err.Error(), token)

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, caught, "the redirect's target heard from the caches")
	require.False(t, strings.Contains(strings.Join(caught, " "), token))
}
