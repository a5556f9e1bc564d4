package fleetcache

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// lf is the package's local fleet: a registry and two members, shared by every test.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// The benchmarks' simulated members run in child processes of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 2}, nil)
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
