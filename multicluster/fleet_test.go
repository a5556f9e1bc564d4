package multicluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// adminToken makes a cluster-admin service account on a member and returns a token for it.
func adminToken(t *testing.T, env *localfleet.Server, name string) string {
	t.Helper()
	ctx := testContext(t)
	kube := kubeClient(t, env)
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "default", Name: name}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// applyWorkload server-side applies a ConfigMap and a Deployment to a member, as fanout-deploy does.
func applyWorkload(ctx context.Context, m *Member) error {
	kube, err := m.Kubernetes(ctx)
	if err != nil {
		return err
	}
	apply := metav1.ApplyOptions{FieldManager: "fleet-test", Force: true}
	cm := corev1ac.ConfigMap("fleet-demo", "default").WithData(map[string]string{"member": m.Name().Name})
	if _, err := kube.CoreV1().ConfigMaps("default").Apply(ctx, cm, apply); err != nil {
		return fmt.Errorf("applying ConfigMap: %w", err)
	}
	labels := map[string]string{"app": "fleet-demo"}
	deploy := appsv1ac.Deployment("fleet-demo", "default").WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(2).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithContainers(corev1ac.Container().WithName("app").WithImage("registry.example/demo:1")))))
	if _, err := kube.AppsV1().Deployments("default").Apply(ctx, deploy, apply); err != nil {
		return fmt.Errorf("applying Deployment: %w", err)
	}
	return nil
}

// TestFleetAgainstRealMembers runs a Fleet over a local fleet of its own: a registry and three
// members, member-1 and member-3 reached with pinned tokens, member-2 with a kubeconfig Secret.
func TestFleetAgainstRealMembers(t *testing.T) {
	realservers.Required(t)
	ignore := goleak.IgnoreCurrent()
	ctx := testContext(t)
	lf, err := localfleet.Start(ctx, localfleet.Options{Members: 3, Labels: map[string]string{"fleet": "test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Stop()
	ns, members := lf.Namespace, lf.Members
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)

	resolver := newResolver(t, access.ResolverOptions{Secrets: access.SecretsFromClient(kubeClient(t, lf.Registry))})
	fleet := NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolver, FleetOptions{
		Namespaces: []string{ns},
		Selector:   labels.SelectorFromSet(labels.Set{"fleet": "test"}),
	})
	if err := fleet.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stopFleet := func() {
		if !stopped {
			fleet.Stop()
			stopped = true
		}
	}
	defer stopFleet()
	if fleet.Len() != 3 {
		t.Fatalf("fleet has %d members, want 3", fleet.Len())
	}
	f := &realFleet{ctx: ctx, lf: lf, ns: ns, members: members, clusters: clusters, resolver: resolver, fleet: fleet}
	t.Run("apply to every member", f.applyToEveryMember)
	t.Run("dynamic and controller-runtime clients", f.dynamicAndControllerRuntimeClients)
	t.Run("built-in types travel as protobuf", f.builtInTypesTravelAsProtobuf)
	t.Run("members added and removed are seen without restart", f.membersAddedAndRemovedAreSeenWithoutRestart)
	t.Run("clients survive an edit that does not change access", f.clientsSurviveAnEditThatDoesNotChangeAccess)
	t.Run("a credential rotated mid-fleet", f.aCredentialRotatedMidFleet)
	t.Run("a member stopped mid-run", f.aMemberStoppedMidRun)

	// Nothing the fleet started outlives it: informers, fan-out workers, abandoned callbacks.
	// Connections to the registry and the members end with their servers.
	stopFleet()
	if err := lf.Stop(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}

// realFleet is what the subtests of TestFleetAgainstRealMembers share.
type realFleet struct {
	ctx      context.Context
	lf       *localfleet.Fleet
	ns       string
	members  []*localfleet.Member
	clusters crv1alpha1.ClusterInterface
	resolver *access.Resolver
	fleet    *Fleet
}

// applyToEveryMember is the subtest "apply to every member" of TestFleetAgainstRealMembers.
func (f *realFleet) applyToEveryMember(t *testing.T) {
	ctx, members, fleet := f.ctx, f.members, f.fleet
	results := ForEach(ctx, fleet.Members(), applyWorkload, Timeout(20*time.Second))
	if err := results.Err(); err != nil {
		t.Fatalf("%v\n%s", err, results)
	}
	for _, m := range members {
		kube := kubeClient(t, m.Server)
		cm, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "fleet-demo", metav1.GetOptions{})
		if err != nil || cm.Data["member"] != m.Name {
			t.Errorf("%s: ConfigMap %v, %v", m.Name, cm.Data, err)
		}
		d, err := kube.AppsV1().Deployments("default").Get(ctx, "fleet-demo", metav1.GetOptions{})
		if err != nil || *d.Spec.Replicas != 2 || d.ManagedFields[0].Manager != "fleet-test" {
			t.Errorf("%s: Deployment: %v", m.Name, err)
		}
	}
}

// dynamicAndControllerRuntimeClients is the subtest "dynamic and controller-runtime clients" of TestFleetAgainstRealMembers.
func (f *realFleet) dynamicAndControllerRuntimeClients(t *testing.T) {
	ctx, fleet := f.ctx, f.fleet
	results := Map(ctx, fleet.Members(), func(ctx context.Context, m *Member) (string, error) {
		dyn, err := m.Dynamic(ctx)
		if err != nil {
			return "", err
		}
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		u, err := dyn.Resource(gvr).Namespace("default").Get(ctx, "fleet-demo", metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("dynamic: %w", err)
		}
		crc, err := m.Client(ctx)
		if err != nil {
			return "", err
		}
		var d appsv1.Deployment
		if err := crc.Get(ctx, client.ObjectKey{Namespace: "default", Name: "fleet-demo"}, &d); err != nil {
			return "", fmt.Errorf("controller-runtime: %w", err)
		}
		return fmt.Sprintf("%s/%d", u.Object["data"].(map[string]any)["member"], *d.Spec.Replicas), nil
	})
	for _, r := range results {
		if r.Err != nil || r.Value != r.Member.Name().Name+"/2" {
			t.Errorf("%s: %q, %v", r.Member, r.Value, r.Err)
		}
	}
}

// builtInTypesTravelAsProtobuf is the subtest "built-in types travel as protobuf" of TestFleetAgainstRealMembers.
func (f *realFleet) builtInTypesTravelAsProtobuf(t *testing.T) {
	ctx, ns, fleet := f.ctx, f.ns, f.fleet
	m := fleet.Member(ns, "member-1")
	kube, err := m.Kubernetes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var contentType string
	res := kube.CoreV1().RESTClient().Get().Namespace("default").Resource("configmaps").Name("fleet-demo").Do(ctx).ContentType(&contentType)
	var cm corev1.ConfigMap
	if err := res.Into(&cm); err != nil || contentType != runtime.ContentTypeProtobuf || cm.Data["member"] != "member-1" {
		t.Errorf("clientset GET: %s, %v, %v", contentType, cm.Data, err)
	}
}

// membersAddedAndRemovedAreSeenWithoutRestart is the subtest "members added and removed are seen without restart" of TestFleetAgainstRealMembers.
func (f *realFleet) membersAddedAndRemovedAreSeenWithoutRestart(t *testing.T) {
	ctx, ns, clusters, resolver, fleet := f.ctx, f.ns, f.clusters, f.resolver, f.fleet
	// Another entry for member-1's server, through the same pinned Secret.
	extra, err := clusters.Get(ctx, "member-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	extra.ObjectMeta = metav1.ObjectMeta{Name: "member-extra", Namespace: ns, Labels: extra.Labels}
	if _, err := clusters.Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLen(t, fleet, 4)
	results := ForEach(ctx, fleet.Members(), applyWorkload)
	if len(results) != 4 || results.Err() != nil {
		t.Fatalf("with the new member:\n%s", results)
	}
	if err := clusters.Delete(ctx, "member-extra", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLen(t, fleet, 3)
	if fleet.Member(ns, "member-extra") != nil || resolver.Len() != 3 {
		t.Errorf("removed member still held: fleet %v, resolver %d entries", fleet.Members(), resolver.Len())
	}
}

// clientsSurviveAnEditThatDoesNotChangeAccess is the subtest "clients survive an edit that does not change access" of TestFleetAgainstRealMembers.
func (f *realFleet) clientsSurviveAnEditThatDoesNotChangeAccess(t *testing.T) {
	ctx, ns, clusters, fleet := f.ctx, f.ns, f.clusters, f.fleet
	m := fleet.Member(ns, "member-2")
	before, _ := m.Kubernetes(ctx)
	// The edit is a change (SubscribeChanges), not a membership event (Subscribe).
	var mu sync.Mutex
	var changed []string
	var membership []MemberEvent
	defer fleet.SubscribeChanges(func(m *Member) { mu.Lock(); changed = append(changed, m.Cluster().Spec.DisplayName); mu.Unlock() })()
	defer fleet.Subscribe(func(ev MemberEvent) { mu.Lock(); membership = append(membership, ev); mu.Unlock() })()
	patch := []byte(`{"spec":{"displayName":"Member A (renamed)"}}`)
	if _, err := clusters.Patch(ctx, "member-2", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return m.Cluster().Spec.DisplayName == "Member A (renamed)" && len(changed) > 0, nil
	})
	if err != nil {
		t.Fatal("the fleet did not see the edit, or did not tell SubscribeChanges")
	}
	if after, _ := m.Kubernetes(ctx); after != before {
		t.Error("a display-name edit rebuilt the member's clientset")
	}
	mu.Lock()
	defer mu.Unlock()
	if changed[len(changed)-1] != "Member A (renamed)" {
		t.Errorf("SubscribeChanges was told %q", changed)
	}
	for _, ev := range membership {
		if ev.Type != MemberAdded { // each member's first event
			t.Errorf("a display-name edit was a membership event: %v %s", ev.Type, ev.Member)
		}
	}
}

// aCredentialRotatedMidFleet is the subtest "a credential rotated mid-fleet" of TestFleetAgainstRealMembers.
func (f *realFleet) aCredentialRotatedMidFleet(t *testing.T) {
	ctx, lf, ns, members, fleet := f.ctx, f.lf, f.ns, f.members, f.fleet
	a := members[0] // reached with a token: rotate it, then revoke the old one
	if a.ProviderType != v1alpha1.ProviderTypeSecret {
		t.Fatalf("%s is reached by %s, want a token Secret", a.Name, a.ProviderType)
	}
	secret, err := kubeClient(t, lf.Registry).CoreV1().Secrets(ns).Get(ctx, a.Name+"-token", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret.Data["token"] = []byte(adminToken(t, a.Server, "rotated-admin"))
	if _, err := kubeClient(t, lf.Registry).CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := kubeClient(t, a.Server).CoreV1().ServiceAccounts("kube-system").Delete(ctx, "localfleet-admin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The member may accept the revoked token for a while; keep working across that moment.
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		results := ForEach(ctx, fleet.Members(), applyWorkload, Timeout(10*time.Second))
		if err := results.Err(); err != nil {
			t.Fatalf("a fan-out failed across the rotation: %v\n%s", err, results)
		}
		time.Sleep(time.Second)
	}
}

// aMemberStoppedMidRun is the subtest "a member stopped mid-run" of TestFleetAgainstRealMembers.
func (f *realFleet) aMemberStoppedMidRun(t *testing.T) {
	ctx, members, fleet := f.ctx, f.members, f.fleet
	c := members[2]
	const timeout = 3 * time.Second
	start := time.Now()
	results := ForEach(ctx, fleet.Members(), func(ctx context.Context, m *Member) error {
		if m.Name().Name == c.Name {
			if err := c.Stop(); err != nil {
				return fmt.Errorf("stopping the member: %w", err)
			}
		}
		return applyWorkload(ctx, m)
	}, Timeout(timeout))
	if elapsed := time.Since(start); elapsed > timeout+5*time.Second {
		t.Errorf("fan-out took %v with one member down and a %v timeout", elapsed, timeout)
	}
	for _, r := range results {
		switch r.Member.Name().Name {
		case c.Name:
			if r.Err == nil || r.Duration > timeout+time.Second {
				t.Errorf("stopped member: %v after %v", r.Err, r.Duration)
			}
		default:
			if r.Err != nil {
				t.Errorf("%s failed with another member down: %v", r.Member, r.Err)
			}
		}
	}
	t.Logf("\n%s", results)
}

func waitForLen(t *testing.T, f *Fleet, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(testContext(t), 20*time.Millisecond, testTimeout, true, func(context.Context) (bool, error) {
		return f.Len() == n, nil
	})
	if err != nil {
		t.Fatalf("fleet has %d members, want %d", f.Len(), n)
	}
}

func TestLoadMembers(t *testing.T) {
	dir := t.TempDir()
	good := v1alpha1.ClusterList{Items: []v1alpha1.Cluster{*offlineCluster("one", "one.example.com", nil), *offlineCluster("two", "two.example.com", nil)}}
	bad := v1alpha1.ClusterList{Items: []v1alpha1.Cluster{*offlineCluster("ok", "ok.example.com", nil), *offlineCluster("broken", "http://broken.example.com", nil)}}
	write := func(name string, list v1alpha1.ClusterList) string {
		list.Kind, list.APIVersion = "List", "v1"
		data, err := yaml.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	r, _ := access.NewResolver(access.ResolverOptions{})
	ms, err := LoadMembers(write("good.yaml", good), r, FleetOptions{})
	if err != nil || fmt.Sprint(ms) != "[fleet/one fleet/two]" {
		t.Fatalf("LoadMembers: %v, %v", ms, err)
	}
	_, err = LoadMembers(write("bad.yaml", bad), r, FleetOptions{})
	if err == nil || !strings.Contains(err.Error(), "cluster fleet/broken") || !strings.Contains(err.Error(), "serverAddress") {
		t.Errorf("invalid cluster in the file: %v", err)
	}
	if _, err := LoadMembers(filepath.Join(dir, "missing.yaml"), r, FleetOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
