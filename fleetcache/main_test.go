package fleetcache

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/internal/simmembers"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
)

// lf is the package's local fleet: a registry and two members, shared by every test.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// The benchmarks' simulated members run in child processes of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	flag.Parse()
	logf.SetLogger(logr.Discard()) // envtest and the benchmark's controller-runtime peer log through it
	klog.SetLogger(logr.Discard()) // informers log every failed watch of a stopped member
	if testing.Short() {
		os.Exit(m.Run())
	}
	var err error
	lf, err = localfleet.Start(context.Background(), localfleet.Options{Members: 2})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := lf.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// integration marks a test that needs the local fleet: under -short it is skipped.
func integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs kube-apiserver and etcd; run without -short (hack/test.sh builds them)")
	}
}

const testTimeout = 60 * time.Second

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// resolver reads the members' credentials from the registry and rereads them every 200ms, so that
// rotation is seen quickly.
func resolver(t testing.TB) *access.Resolver {
	t.Helper()
	r, err := access.NewResolver(access.ResolverOptions{
		Secrets:         access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
		ClientIP:        netip.MustParseAddr("127.0.0.1"),
		RevalidateAfter: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	return r
}

// startFleet follows the local fleet's Clusters in namespace ns and stops at the end of the test.
func startFleet(t testing.TB, ns string) *multicluster.Fleet {
	t.Helper()
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(lf.Registry.Config), resolver(t), multicluster.FleetOptions{Namespaces: []string{ns}})
	require.NoError(t, fleet.Start(testContext(t)))
	t.Cleanup(fleet.Stop)
	return fleet
}

// memberKube is an administrator's clientset for a member, to change what the caches watch.
func memberKube(t testing.TB, m *localfleet.Member) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(m.Config)
}

// newMemberNamespace makes a namespace of the given name on every member.
func newMemberNamespace(t testing.TB, name string) {
	t.Helper()
	for _, m := range lf.Members {
		_, err := memberKube(t, m).CoreV1().Namespaces().Create(testContext(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// ignoreIdleConnections leaves out the idle HTTP/2 connections to the servers: client-go shares
// transports between clients of one config, so they outlive the test that opened them.
var ignoreIdleConnections = []goleak.Option{
	goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
}
