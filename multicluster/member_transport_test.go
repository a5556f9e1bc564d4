package multicluster

import (
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// tokenFileProvider is a Cluster's pointer at a token file, as a projected token is named.
func tokenFileProvider(path string) v1alpha1.AuthProviderConfig {
	return v1alpha1.AuthProviderConfig{Name: "projected", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeTokenFile},
		Config: map[string]string{"path": path}}
}

func writeToken(t *testing.T, path, token string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(token), 0o600))
}

// onlyMember is the one Member that MembersOf makes of c.
func onlyMember(t *testing.T, resolver *access.Resolver, c *v1alpha1.Cluster) *Member {
	t.Helper()
	ms := MembersOf(resolver, []v1alpha1.Cluster{*c}, FleetOptions{})
	require.Len(t, ms, 1)
	return ms[0]
}

// A token file rewritten behind a Member, as a projected token is, reaches a client built once on
// Member.Transport within the Resolver's revalidation window, and a watch opened with the old
// token keeps running after that token's account is deleted. (The same call's retry after a 401
// is TestMemberTransportRetriesA401OnlyAfterARotation; a member's API server accepts a token it
// has checked for ten seconds more, so against a real one that would cost this test ten seconds.)
func TestMemberTransportFollowsARewrittenTokenFile(t *testing.T) {
	realservers.Required(t)
	ctx := testContext(t)
	ns, memberNS := fleetmain.Namespace(t, registry), fleetmain.Namespace(t, member)
	admin := kubeClient(t, member)
	token := func(name string) string {
		_, err := admin.CoreV1().ServiceAccounts(memberNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
		tr, err := admin.CoreV1().ServiceAccounts(memberNS).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	old, fresh := token("old"), token("new")
	_, err := admin.RbacV1().RoleBindings(memberNS).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "view"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: memberNS, Name: "old"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: memberNS, Name: "new"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	root := t.TempDir()
	path := filepath.Join(root, "token")
	writeToken(t, path, old)
	c := storedCluster(t, ns, "projected", member.URL(), member.Config.CAData, tokenFileProvider(path))
	const window = time.Second
	m := onlyMember(t, newResolver(t, access.ResolverOptions{
		FileRoots:       []access.FileRoot{{Dir: root, SendTo: access.Servers(member.URL())}},
		RevalidateAfter: window,
	}), c)
	// A client built once, as caches and controllers build theirs.
	cfg, err := m.Config(ctx)
	require.NoError(t, err)
	kube, err := kubernetes.NewForConfigAndClient(rest.CopyConfig(cfg), &http.Client{Transport: m.Transport()})
	require.NoError(t, err)
	whoami := func() string { // which account the member heard
		t.Helper()
		review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err, "a client on Member.Transport failed")
		return strings.TrimPrefix(review.Status.UserInfo.Username, "system:serviceaccount:"+memberNS+":")
	}

	require.Equal(t, "old", whoami())
	w, err := kube.CoreV1().ConfigMaps(memberNS).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	defer w.Stop()
	writeToken(t, path, fresh)
	rewritten := time.Now()
	require.Eventually(t, func() bool { return whoami() == "new" }, 10*time.Second, 50*time.Millisecond)
	// The Resolver rereads the file once the window has passed; a loaded machine gets two seconds more.
	require.Less(t, time.Since(rewritten), window+2*time.Second, "the rewritten token file was used only after the revalidation window")
	require.NoError(t, admin.CoreV1().ServiceAccounts(memberNS).Delete(ctx, "old", metav1.DeleteOptions{}))

	_, err = admin.CoreV1().ConfigMaps(memberNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after-rotation"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	select {
	case e, ok := <-w.ResultChan():
		require.True(t, ok, "the watch opened with the old token was closed")
		require.Equal(t, watch.Added, e.Type)
		require.Equal(t, "after-rotation", e.Object.(*corev1.ConfigMap).Name)
	case <-ctx.Done():
		t.Fatal("the watch opened with the old token saw nothing")
	}
}

// refusingMember is a member's API server that accepts only the tokens in accept, and records the
// token of every request it hears.
type refusingMember struct {
	*httptest.Server
	mu     sync.Mutex
	accept map[string]bool
	heard  []string
}

func newRefusingMember(t *testing.T) *refusingMember {
	rm := &refusingMember{accept: map[string]bool{}}
	rm.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		rm.mu.Lock()
		rm.heard = append(rm.heard, token)
		ok := rm.accept[token]
		rm.mu.Unlock()
		if !ok {
			http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`, http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(rm.Close)
	return rm
}

// hear returns the tokens heard since it was last called, and from now on accepts only the
// tokens given.
func (rm *refusingMember) hear(accept ...string) []string {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	heard := rm.heard
	rm.heard, rm.accept = nil, map[string]bool{}
	for _, a := range accept {
		rm.accept[a] = true
	}
	return heard
}

// notReplayable is a request body that cannot be sent twice (no GetBody).
type notReplayable struct{ io.Reader }

// Member.Transport sends a refused request once more only when the member's credentials changed
// since it was sent, and never more than once, nor with a body it cannot send again.
func TestMemberTransportRetriesA401OnlyAfterARotation(t *testing.T) {
	rm := newRefusingMember(t)
	root := t.TempDir()
	path := filepath.Join(root, "token")
	writeToken(t, path, "first")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rm.Certificate().Raw})
	resolver, err := access.NewResolver(access.ResolverOptions{
		FileRoots:       []access.FileRoot{{Dir: root, SendTo: access.Servers(rm.URL)}},
		RevalidateAfter: time.Hour, // only a 401 makes the Resolver read the file again
		ClientIP:        testClientIP,
	})
	require.NoError(t, err)
	m := onlyMember(t, resolver, offlineCluster("refusing", rm.URL, ca, tokenFileProvider(path)))
	client := &http.Client{Transport: m.Transport()}
	t.Cleanup(client.CloseIdleConnections)
	send := func(method string, body io.Reader) int {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), method, rm.URL+"/api/v1/namespaces/default/configmaps", body)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	rm.hear("first")
	require.Equal(t, http.StatusOK, send(http.MethodGet, nil))
	require.Equal(t, []string{"first"}, rm.hear())

	require.Equal(t, http.StatusUnauthorized, send(http.MethodGet, nil))
	require.Equal(t, []string{"first"}, rm.hear("second"), "a 401 to unchanged credentials was sent again")

	writeToken(t, path, "second")
	require.Equal(t, http.StatusOK, send(http.MethodPost, strings.NewReader(`{"kind":"ConfigMap"}`)))
	require.Equal(t, []string{"first", "second"}, rm.hear(), "a 401 after a rotation is sent once more, with the new token")

	writeToken(t, path, "third")
	require.Equal(t, http.StatusUnauthorized, send(http.MethodGet, nil))
	require.Equal(t, []string{"second", "third"}, rm.hear("fourth"), "a request is retried once at most")

	// The 401 to "third" marked it, so the next request reads the file again, finds it unchanged
	// and is not sent twice.
	require.Equal(t, http.StatusUnauthorized, send(http.MethodGet, nil))
	require.Equal(t, []string{"third"}, rm.hear("fourth"))

	writeToken(t, path, "fourth")
	require.Equal(t, http.StatusUnauthorized, send(http.MethodPost, notReplayable{strings.NewReader(`{"kind":"ConfigMap"}`)}))
	require.Equal(t, []string{"third"}, rm.hear("fourth"), "a body that cannot be replayed was sent twice")
	require.Equal(t, http.StatusOK, send(http.MethodGet, nil), "the next request uses the new token")
	require.Equal(t, []string{"fourth"}, rm.hear())
}
