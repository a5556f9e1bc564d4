package localfleet_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
)

func TestMain(m *testing.M) {
	// -short runs the unit tests of pure logic, without the API-server binaries; every test here
	// runs against real servers.
	flag.Parse()
	if testing.Short() {
		fmt.Println("skipped under -short: these tests need kube-apiserver and etcd")
		os.Exit(0)
	}
	logf.SetLogger(logr.Discard()) // envtest logs through controller-runtime's logger
	os.Exit(m.Run())
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestStartRegistersMembersBothWays(t *testing.T) {
	ctx := testContext(t)
	f, err := localfleet.Start(ctx, localfleet.Options{Members: 2, Namespace: "team-a", Labels: map[string]string{"env": "test"}, MarkStopped: true})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()

	registry := versioned.NewForConfigOrDie(f.Registry.Config).ClusterregistryV1alpha1().Clusters("team-a")
	list, err := registry.List(ctx, metav1.ListOptions{LabelSelector: "env=test"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "member-1" || list.Items[1].Name != "member-2" {
		t.Fatalf("registered Clusters: %v", list.Items)
	}
	for _, c := range list.Items {
		if !c.IsReady() || c.Status.Version != localfleet.KubernetesVersion || c.Status.LastProbeTime == nil {
			t.Errorf("%s: status %+v", c.Name, c.Status)
		}
		if errs := v1alpha1.ValidateCluster(&c); len(errs) > 0 {
			t.Errorf("%s: %v", c.Name, errs)
		}
	}
	if got := []string{f.Members[0].ProviderType, f.Members[1].ProviderType}; got[0] != v1alpha1.ProviderTypeSecret || got[1] != v1alpha1.ProviderTypeKubeconfigSecret {
		t.Errorf("provider types %v, want secret then kubeconfig-secret", got)
	}
	if f.Member("member-2") != f.Members[1] || f.Member("member-9") != nil {
		t.Error("Member does not find members by name")
	}
	if f.Kubectl == "" {
		t.Error("no kubectl beside the test binaries")
	}
	sf := &startedFleet{ctx: ctx, f: f, registry: registry, list: list}
	sf.reachedThroughRegistry(t)
	sf.stoppedAndCleanedUp(t)
}

// startedFleet is what the parts of TestStartRegistersMembersBothWays share, in order.
type startedFleet struct {
	ctx      context.Context
	f        *localfleet.Fleet
	registry crv1alpha1.ClusterInterface
	list     *v1alpha1.ClusterList
}

// reachedThroughRegistry: a tool reaches every member through the registry's pointers alone,
// pinning enforced and TLS verified.
func (sf *startedFleet) reachedThroughRegistry(t *testing.T) {
	ctx, f, list := sf.ctx, sf.f, sf.list
	// A tool reaches every member through the registry's pointers alone, with the Resolver's
	// defaults: pinning enforced, TLS verified.
	resolver, err := access.NewResolver(access.ResolverOptions{
		Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(f.Registry.Config)),
	})
	if err != nil {
		t.Fatal(err)
	}
	members := multicluster.MembersOf(resolver, list.Items, multicluster.FleetOptions{})
	results := multicluster.Map(ctx, members, func(ctx context.Context, m *multicluster.Member) (string, error) {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return "", err
		}
		v, err := kube.Discovery().ServerVersion()
		if err != nil {
			return "", err
		}
		return v.GitVersion, nil
	})
	for _, r := range results {
		if r.Err != nil || r.Value != localfleet.KubernetesVersion {
			t.Errorf("%s through the registry: %q, %v", r.Member, r.Value, r.Err)
		}
	}
}

// stoppedAndCleanedUp: stopping a member is an outage its Cluster says; Stop ends every server and
// removes every file, once.
func (sf *startedFleet) stoppedAndCleanedUp(t *testing.T) {
	ctx, f, registry := sf.ctx, sf.f, sf.registry
	// Stopping a member is an outage: the server is gone and, with MarkStopped, its Cluster says so.
	m2 := f.Members[1]
	if err := m2.Stop(); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", hostOf(t, m2.URL()), time.Second); err == nil {
		conn.Close()
		t.Error("the stopped member still accepts connections")
	}
	c, err := registry.Get(ctx, "member-2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ready := c.Status.Condition(v1alpha1.ConditionReady); !c.IsNotReady() || ready.Reason != v1alpha1.ReasonUnreachable {
		t.Errorf("stopped member's Ready condition: %+v", ready)
	}

	// Stop ends every server and removes every file, once.
	if err := f.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*localfleet.Server{f.Registry, f.Members[0].Server} {
		if conn, err := net.DialTimeout("tcp", hostOf(t, s.URL()), time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after Stop", s.URL())
		}
		if _, err := os.Stat(s.Kubeconfig); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", s.Kubeconfig, err)
		}
	}
	if err := f.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func hostOf(t *testing.T, server string) string {
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

func TestStartRejectsBadOptions(t *testing.T) {
	if _, err := localfleet.Start(context.Background(), localfleet.Options{Members: -1}); err == nil || !strings.Contains(err.Error(), "Members") {
		t.Errorf("Members -1: %v", err)
	}
	if _, err := localfleet.Start(context.Background(), localfleet.Options{Bare: true, Members: 1}); err == nil || !strings.Contains(err.Error(), "Bare with Members 1") {
		t.Errorf("Bare with a member: %v", err)
	}
	empty := t.TempDir()
	_, err := localfleet.Start(context.Background(), localfleet.Options{BinaryAssetsDirectory: empty})
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver not found in "+empty) || !strings.Contains(err.Error(), "build-testbins.sh") {
		t.Errorf("no binaries: %v", err)
	}
}

// The default directory is the one hack/build-testbins.sh fills.
func TestAssetsDirMatchesTheBuildScript(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv("CLUSTER_REGISTRY_SDK_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", cache)
	// The script links the assets directory to binaries it built; give it stand-ins to link.
	for _, dir := range []string{"kubernetes-" + localfleet.KubernetesVersion, "etcd-" + localfleet.EtcdVersion, "kwok-" + localfleet.KwokVersion,
		"konnectivity-" + localfleet.KonnectivityVersion} {
		if err := os.MkdirAll(filepath.Join(cache, "cluster-registry-sdk", dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kube := "kubernetes-" + localfleet.KubernetesVersion + "/"
	for _, bin := range []string{kube + "kube-apiserver", kube + "kubectl", kube + "kube-controller-manager", kube + "kube-scheduler",
		"etcd-" + localfleet.EtcdVersion + "/etcd", "kwok-" + localfleet.KwokVersion + "/kwok",
		"konnectivity-" + localfleet.KonnectivityVersion + "/konnectivity-agent"} {
		if err := os.WriteFile(filepath.Join(cache, "cluster-registry-sdk", bin), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	out, err := exec.Command("../hack/build-testbins.sh", "--print").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := localfleet.AssetsDir("")
	if want := strings.TrimSpace(string(out)); err != nil || got != want {
		t.Errorf("AssetsDir() = %q, %v; the build script prints %q", got, err, want)
	}
}

// A restarted API server answers on the same address, to the same credentials, with the same data;
// while it is down, clients are refused.
func TestAPIServerRestart(t *testing.T) {
	ctx := testContext(t)
	f, err := localfleet.Start(ctx, localfleet.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	kube := kubernetes.NewForConfigOrDie(f.Registry.Config)
	if _, err := kube.CoreV1().ConfigMaps(f.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.Registry.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(f.Namespace).Get(ctx, "kept", metav1.GetOptions{}); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("while stopped: %v, want connection refused", err)
	}
	if err := f.Registry.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(f.Namespace).Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("after the restart: %v", err)
	}
}
