package delivery_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// plug is a TCP proxy to a member that the test can pull out: connections under way are cut and
// new ones refused at once, as a member whose network went away.
type plug struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	out    bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newPlug(t *testing.T, target string) *plug {
	host, _, err := net.SplitHostPort(target)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0")) // the member's address: its certificate names it
	require.NoError(t, err)
	p := &plug{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Go(p.serve)
	return p
}

// close stops the plug and its connections' goroutines.
func (p *plug) close() {
	_ = p.ln.Close()
	p.pull()
	p.wg.Wait()
}

func (p *plug) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.out {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(up, c); _ = up.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, up); _ = c.Close() })
	}
}

// pull cuts every connection and refuses new ones.
func (p *plug) pull() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = map[net.Conn]bool{}
}

// push lets connections through again.
func (p *plug) push() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out = false
}

// A member that cannot be reached costs the rollout only its own failure: it shows Unreachable
// with the revision it last had (never a stuck Applying or Progressing), the other member gets
// the new revision, and once reachable again it gets it too. No credential is in what status says.
func TestUnreachableMemberKeepsItsLastRevision(t *testing.T) {
	ns := fleettest.CopySet(t, lf, "member-2")
	member := lf.Member("member-1") // the member whose Cluster points at a token Secret
	u, err := url.Parse(member.Config.Host)
	require.NoError(t, err)
	p := newPlug(t, u.Host)
	// The member's own token, in a Secret pinned to the plug's address.
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	c, err := registry.Clusters(lf.Namespace).Get(t.Context(), "member-1", metav1.GetOptions{})
	require.NoError(t, err)
	secret, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(lf.Namespace).Get(t.Context(), c.Spec.AuthInfo.Providers[0].Config["name"], metav1.GetOptions{})
	require.NoError(t, err)
	fleettest.RegisterServer(t, lf, ns, "flaky", "https://"+p.ln.Addr().String(), member.Config.CAData, string(secret.Data[v1alpha1.SecretTokenKey]))

	env := startDeliveryIn(t, ns, nil)
	t.Cleanup(p.close) // before the Controller's cleanup looks for leaked goroutines
	env.decide(t, "member-2", "flaky")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "flaky", Namespace: ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("flaky-"+ns, map[string]string{"v": "1"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	first := env.waitRelease(t, "flaky", "both ready", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 }).Status.Revision

	p.pull()
	env.updateRelease(t, ns, "flaky", func(cur *v1alpha1.Release) {
		cur.Spec.Source.Manifests = manifests(t, configMap("flaky-"+ns, map[string]string{"v": "2"}))
	})
	pulled := time.Now()
	got := env.waitRelease(t, "flaky", "member-2 ready at the new revision, flaky unreachable", func(r *v1alpha1.Release) bool {
		return r.Status.Revision != first && r.Status.Ready == 1 && len(r.Status.Worst) == 1 && r.Status.Worst[0].Phase == v1alpha1.PhaseUnreachable
	})
	t.Logf("unreachable member reported %s after the new revision", time.Since(pulled).Round(10*time.Millisecond))
	w := got.Status.Worst[0]
	require.Equal(t, "flaky", w.Cluster)
	require.Equal(t, first, w.Revision, "the revision the member last had")
	require.Equal(t, v1alpha1.FailureUnreachable, w.Reason)
	require.NotContains(t, w.Message, string(secret.Data[v1alpha1.SecretTokenKey]))
	require.Equal(t, metav1.ConditionTrue, condition(got, v1alpha1.ReleaseDegraded))

	p.push()
	env.waitRelease(t, "flaky", "both ready at the new revision once reachable", func(r *v1alpha1.Release) bool { return r.Status.Ready == 2 })
	require.NoError(t, env.registry.ClusterregistryV1alpha1().Releases(ns).Delete(t.Context(), "flaky", metav1.DeleteOptions{}))
}

// A decision that names a Cluster the set does not have, and a Cluster whose credentials the
// trust policy refuses (its Secret pinned to another server: an editor of the Cluster pointed it
// at the member), are both Unreachable, each with its own reason: ClusterNotFound and
// CredentialsUnavailable (both read Unreachable before), the message saying why, no token in it.
func TestUnreachableReasonsTellCasesApart(t *testing.T) {
	ns := fleettest.CopySet(t, lf, "member-2")
	member := lf.Member("member-1")
	const token = "not-a-real-token-but-secret-all-the-same"
	fleettest.RegisterServer(t, lf, ns, "repointed", "https://127.0.0.2:1", member.Config.CAData, token)
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	c, err := registry.Clusters(ns).Get(t.Context(), "repointed", metav1.GetOptions{})
	require.NoError(t, err)
	c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = member.URL()
	_, err = registry.Clusters(ns).Update(t.Context(), c, metav1.UpdateOptions{})
	require.NoError(t, err)

	env := startDeliveryIn(t, ns, nil)
	env.decide(t, "member-2", "repointed", "ghost")
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "reasons", Namespace: ns}, Spec: v1alpha1.ReleaseSpec{
		Source:    v1alpha1.ReleaseSource{Manifests: manifests(t, configMap("reasons-"+ns, map[string]string{"v": "1"}))},
		Placement: v1alpha1.ReleasePlacement{Name: "web"},
	}}
	_, err = env.registry.ClusterregistryV1alpha1().Releases(ns).Create(t.Context(), rel, metav1.CreateOptions{})
	require.NoError(t, err)
	got := env.waitRelease(t, "reasons", "one ready, two unreachable", func(r *v1alpha1.Release) bool {
		return r.Status.Ready == 1 && len(r.Status.Worst) == 2
	})
	reasons := map[string]string{}
	for _, w := range got.Status.Worst {
		require.Equal(t, v1alpha1.PhaseUnreachable, w.Phase, "%s", w.Cluster)
		require.NotContains(t, w.Message, token)
		reasons[w.Cluster] = w.Reason
		t.Logf("%s: %s: %s", w.Cluster, w.Reason, w.Message)
	}
	require.Equal(t, map[string]string{"ghost": v1alpha1.FailureClusterNotFound, "repointed": v1alpha1.FailureCredentialsUnavailable}, reasons)
}
