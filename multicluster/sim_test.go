package multicluster

import (
	"context"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

// Simulated members (testkit/simmembers) stand in for hundreds of API servers in the
// benchmarks; these are the helpers that reach them through a Fleet.

// Simulated members answer through a Fleet as real ones do, and count handshakes: a check on
// the benchmarks' own instrument.
func TestSimulatedMembers(t *testing.T) {
	realservers.Required(t)
	sim := simmembers.Start(t, 3, time.Millisecond)
	members := MembersOf(simmembers.Resolver(t), sim.Clusters("sim"), FleetOptions{})
	for range 3 {
		if err := ForEach(context.Background(), members, getConfigMap, NoRetry()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	applied := Map(context.Background(), members, func(ctx context.Context, m *Member) (string, error) {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return "", err
		}
		cm, err := kube.CoreV1().ConfigMaps("default").Apply(ctx, corev1ac.ConfigMap("fleet-demo", "default").WithData(map[string]string{"k": "v"}), metav1.ApplyOptions{FieldManager: "sim-test"})
		if err != nil {
			return "", err
		}
		return cm.Data["k"], nil
	}, NoRetry())
	for _, r := range applied {
		if r.Err != nil || r.Value != "v" {
			t.Errorf("apply to %s: %q, %v", r.Member, r.Value, r.Err)
		}
	}
	if got := handshakesPerMember(t, members); got != 1 {
		t.Errorf("%.2f handshakes per member across 4 fan-outs, want 1", got)
	}
}

// getConfigMap is the benchmarks' unit of work: one namespaced GET.
func getConfigMap(ctx context.Context, m *Member) error {
	kube, err := m.Kubernetes(ctx)
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().ConfigMaps("default").Get(ctx, "fleet-demo", metav1.GetOptions{})
	return err
}

// simDebug reads a number from one of a simulated member's debug paths, over the member's existing
// connection.
func simDebug(tb testing.TB, m *Member, path string) int64 {
	tb.Helper()
	kube, err := m.Kubernetes(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		tb.Fatalf("%s answered %q", path, raw)
	}
	return n
}

// simCPU is the simulated members' process's CPU time so far.
func simCPU(tb testing.TB, m *Member) time.Duration {
	return time.Duration(simDebug(tb, m, "/debug/cpu")) * time.Microsecond
}

// handshakesPerMember is the mean number of TLS handshakes the simulated members have seen.
func handshakesPerMember(tb testing.TB, members []*Member) float64 {
	var total int64
	for _, m := range members {
		total += simDebug(tb, m, "/debug/handshakes")
	}
	return float64(total) / float64(len(members))
}
