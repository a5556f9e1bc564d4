package access

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// clock is a settable time source for the Resolver's revalidation.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }

func serverVersion(t testing.TB, a *Resolved) {
	t.Helper()
	kube, err := kubernetes.NewForConfigAndClient(a.Config, a.HTTPClient)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
}

// secretFixture is a simulated member accepting token, a pinned Secret holding it, a Cluster named
// name pointing at both, and a Resolver that reads the Secret.
func secretFixture(t *testing.T, name, token string) (*fakeMember, *memSecrets, *v1alpha1.Cluster, *Resolver) {
	t.Helper()
	fake := newFakeMember(t, token)
	secrets := &memSecrets{}
	secrets.put(tokenSecret("fleet", "creds", token, pinnedTo(fake.URL)))
	c := offlineCluster(name, fake.URL, fake.caPEM(), provider("p", v1alpha1.ProviderTypeSecret, map[string]string{"name": "creds"}))
	return fake, secrets, c, newResolver(t, ResolverOptions{Secrets: secrets})
}

// An unchanged Cluster with unchanged inputs resolves to the same Resolved, and so the same
// transport: one TLS handshake, however often it is resolved and used, revalidations included.
// Changed inputs give a new Resolved; a removed Cluster is forgotten. Resolved.Current says, at
// each step, whether Resolve would answer with it again without reading anything.
func TestCacheKeepsTransportUntilInputsChange(t *testing.T) {
	realservers.Required(t)
	fake, secrets, c, r := secretFixture(t, "cached", "tok-1")
	clk := &clock{now: time.Now()}
	r.now = clk.Now

	first, err := r.Resolve(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Current() {
		t.Fatal("a Resolved just made is not current")
	}
	if (&Resolved{Config: first.Config}).Current() {
		t.Fatal("a Resolved made by hand is current")
	}
	cr := &cachedResolution{fake: fake, secrets: secrets, c: c, r: r, clk: clk, first: first}
	cr.kept(t)
	cr.renewed(t)
}

// cachedResolution is what the parts of TestCacheKeepsTransportUntilInputsChange share, in order.
type cachedResolution struct {
	fake    *fakeMember
	secrets *memSecrets
	c       *v1alpha1.Cluster
	r       *Resolver
	clk     *clock
	first   *Resolved
}

// kept: an unchanged Cluster gets the same Resolved, one TLS handshake, its Secret reread at each
// revalidation; a change that does not shape the result keeps it too.
func (cr *cachedResolution) kept(t *testing.T) {
	fake, secrets, c, r, clk, first := cr.fake, cr.secrets, cr.c, cr.r, cr.clk, cr.first
	for i := range 50 {
		a, err := r.Resolve(testContext(t), c)
		if err != nil {
			t.Fatal(err)
		}
		if a != first {
			t.Fatalf("call %d: a new Resolved for an unchanged Cluster", i)
		}
		serverVersion(t, a)
		if i%10 == 9 {
			clk.Advance(DefaultRevalidateAfter + time.Second) // the next call rereads the Secret
			if a.Current() {
				t.Fatal("a Resolved past its revalidation is current")
			}
		}
	}
	if reads := secrets.reads; reads < 5 {
		t.Errorf("Secret read %d times across 4 revalidations", reads)
	}
	if n := fake.handshakes.Load(); n != 1 {
		t.Errorf("%d TLS handshakes across 50 uses, want 1", n)
	}

	// A label or a display name does not shape the result; an unrelated copy of the object with
	// them changed still gets the same Resolved.
	edited := c.DeepCopy()
	edited.Labels = map[string]string{"env": "prod"}
	edited.Spec.DisplayName = "renamed"
	if a, _ := r.Resolve(testContext(t), edited); a != first {
		t.Error("a change that does not shape the result made a new Resolved")
	}
}

// renewed: a rotated Secret, a 401 from the member, and a spec change that shapes the result each
// make a new Resolved.
func (cr *cachedResolution) renewed(t *testing.T) {
	fake, secrets, c, r, clk, first := cr.fake, cr.secrets, cr.c, cr.r, cr.clk, cr.first
	// Rotation: the Secret changes, and after revalidation the Access is new.
	secrets.put(tokenSecret("fleet", "creds", "tok-2", pinnedTo(fake.URL)))
	fake.token.Store("tok-2")
	clk.Advance(DefaultRevalidateAfter + time.Second)
	rotated, err := r.Resolve(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	if rotated == first {
		t.Fatal("a rotated Secret kept the old Resolved")
	}
	serverVersion(t, rotated)

	// A 401 from the member makes the next Resolve reread the inputs.
	fake.token.Store("tok-3")
	secrets.put(tokenSecret("fleet", "creds", "tok-3", pinnedTo(fake.URL)))
	current, _ := r.Resolve(testContext(t), c)
	kube, _ := kubernetes.NewForConfigAndClient(current.Config, current.HTTPClient)
	if _, err := kube.Discovery().ServerVersion(); err == nil {
		t.Fatal("the member accepted a stale token")
	}
	if current.Current() {
		t.Fatal("a Resolved whose member answered 401 is current")
	}
	after401, err := r.Resolve(testContext(t), c)
	if err != nil || after401 == current {
		t.Fatalf("after a 401: %v, same Resolved: %v", err, after401 == current)
	}
	serverVersion(t, after401)

	// A spec change that shapes the result is seen at once, without waiting to revalidate.
	moved := c.DeepCopy()
	moved.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = "https://localhost:" + fake.URL[len("https://127.0.0.1:"):]
	secrets.put(tokenSecret("fleet", "creds", "tok-3", pinnedTo(fake.URL, moved.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress)))
	if a, err := r.Resolve(testContext(t), moved); err != nil || a == after401 || a.Server.Hostname() != "localhost" {
		t.Errorf("moved endpoint: %v, %v", a, err)
	}

	if r.Len() != 1 {
		t.Errorf("Len() = %d, want 1", r.Len())
	}
	kept, _ := r.Resolve(testContext(t), moved)
	if !kept.Current() {
		t.Fatal("the Cluster's resolution is not current")
	}
	r.Forget("fleet", "cached")
	if kept.Current() {
		t.Error("a forgotten Cluster's resolution is current")
	}
	if r.Len() != 0 {
		t.Errorf("Len() = %d after Forget, want 0", r.Len())
	}
}

// A recreated Cluster (same name, new UID) is resolved afresh.
func TestCacheKeyedByUID(t *testing.T) {
	_, secrets, c, r := secretFixture(t, "recreated", "tok")
	first, err := r.Resolve(testContext(t), c)
	if err != nil {
		t.Fatal(err)
	}
	reads := secrets.reads
	c.UID = "another-uid"
	second, err := r.Resolve(testContext(t), c)
	if err != nil || secrets.reads == reads || second == first {
		t.Errorf("a new UID was not resolved afresh: %v (same Resolved: %v)", err, second == first)
	}
}

// Resolving an unchanged Cluster allocates nothing: it is on the path of every call a fleet makes.
func TestResolveCachedDoesNotAllocate(t *testing.T) {
	r, c := cachedResolver(t)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if _, err := r.Resolve(ctx, c); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("cached Resolve allocates %.1f times per call, want 0", allocs)
	}
}

func cachedResolver(tb testing.TB) (*Resolver, *v1alpha1.Cluster) {
	tb.Helper()
	secrets := &memSecrets{}
	secrets.put(tokenSecret("fleet", "creds", "tok", pinnedTo("https://member.example.com:6443")))
	c := offlineCluster("bench", "https://member.example.com:6443", nil,
		provider("people", v1alpha1.ProviderTypeExec, map[string]string{"command": "login", "args": "a b c"}),
		provider("controller", v1alpha1.ProviderTypeSecret, map[string]string{"name": "creds", "namespace": "fleet"}))
	c.Spec.KubernetesAPIEndpoints.ServerEndpoints = append(c.Spec.KubernetesAPIEndpoints.ServerEndpoints,
		v1alpha1.ServerAddressByClientCIDR{ClientCIDR: "10.0.0.0/8", ServerAddress: "10.0.0.1:6443"})
	r, err := NewResolver(ResolverOptions{Secrets: secrets, Prefer: []string{v1alpha1.ProviderTypeSecret}})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := r.Resolve(context.Background(), c); err != nil {
		tb.Fatal(err)
	}
	return r, c
}

// BenchmarkResolveCached measures Resolve of an unchanged Cluster; the target is under 1µs and no
// allocation. It reports ns/op and allocs/op, and the time as a ratio of that target.
func BenchmarkResolveCached(b *testing.B) {
	r, c := cachedResolver(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Resolve(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "target-ratio")
}

// BenchmarkResolveCachedParallel is the same from every core at once, as a fleet's fan-out does.
func BenchmarkResolveCachedParallel(b *testing.B) {
	r, c := cachedResolver(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.Resolve(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}
