package tunnel_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/testkit/simmembers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
	"github.com/cluster-registry/sdk/tunnel"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// benchLatency is each simulated member's latency, as the fan-out benchmarks of package multicluster
// have it.
const benchLatency = 50 * time.Millisecond

// BenchmarkTunnel measures the tunnel against direct connections to the same simulated members
// (package simmembers, in other processes), in the same run: a tunnel server in a process of its
// own, authenticating real agents (konnectivity's agent library, in another, one per member)
// against the fleet's registry, every member's agent dialling its simulated API server. The two
// arms run in turn, so the machine's noise falls on both. Reported:
//   - fanout/members=100: latency-ratio-to-direct, a fan-out's wall time (one GET on every
//     member, connections kept) through the tunnel over the same fan-out direct (target at most
//     1.3), with direct-ms, tunnel-ms and added-ms;
//   - probes/members=1000: probes-per-s-per-core direct and through the tunnel (a GET /readyz on
//     every member, 64 at a time, connections kept, as health with KeepConnections probes), from
//     the reader's CPU, and their ratio (target at least 0.7); server-CPU-µs/probe, the tunnel
//     server's CPU per probe, and all-in-probes-ratio-to-direct, the ratio with it counted as the
//     reader's; and server-KiB/member, the heap the tunnel server holds per connected agent.
func BenchmarkTunnel(b *testing.B) {
	realservers.Required(b)
	b.Run("fanout/members=100", func(b *testing.B) { benchFanOutThroughTheTunnel(b, 100) })
	b.Run("probes/members=1000", func(b *testing.B) { benchProbesThroughTheTunnel(b, 1000) })
}

func benchFanOutThroughTheTunnel(b *testing.B, n int) {
	direct, tunnelled, _, _ := benchArms(b, n)
	ctx := context.Background()
	get := func(ctx context.Context, m *multicluster.Member) error {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return err
		}
		_, err = kube.CoreV1().ConfigMaps("default").Get(ctx, "fleet-demo", metav1.GetOptions{})
		return err
	}
	fanOut := func(members []*multicluster.Member) time.Duration {
		start := time.Now()
		if err := multicluster.ForEach(ctx, members, get, multicluster.NoRetry()).Err(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	fanOut(direct) // warm: connections made, handshakes done
	fanOut(tunnelled)
	var spentDirect, spentTunnel time.Duration
	for b.Loop() {
		spentDirect += fanOut(direct)
		spentTunnel += fanOut(tunnelled)
	}
	b.ReportMetric(float64(spentTunnel)/float64(spentDirect), "latency-ratio-to-direct")
	b.ReportMetric(float64(spentDirect)/float64(time.Millisecond)/float64(b.N), "direct-ms")
	b.ReportMetric(float64(spentTunnel)/float64(time.Millisecond)/float64(b.N), "tunnel-ms")
	b.ReportMetric(float64(spentTunnel-spentDirect)/float64(time.Millisecond)/float64(b.N), "added-ms")
}

func benchProbesThroughTheTunnel(b *testing.B, n int) {
	direct, tunnelled, server, serverHeap := benchArms(b, n)
	ctx := context.Background()
	probe := func(ctx context.Context, m *multicluster.Member) error {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return err
		}
		return kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
	}
	pass := func(members []*multicluster.Member) (reader, srv time.Duration) {
		cpu, srv0 := processCPU(), server.cpu(b)
		if err := multicluster.ForEach(ctx, members, probe, multicluster.NoRetry(), multicluster.Concurrency(64)).Err(); err != nil {
			b.Fatal(err)
		}
		return processCPU() - cpu, server.cpu(b) - srv0
	}
	pass(direct)
	pass(tunnelled)
	var cpuDirect, cpuTunnel, cpuServer time.Duration
	for b.Loop() {
		d, _ := pass(direct)
		t, s := pass(tunnelled)
		cpuDirect, cpuTunnel, cpuServer = cpuDirect+d, cpuTunnel+t, cpuServer+s
	}
	probes := float64(b.N * n)
	perCoreDirect, perCoreTunnel := probes/cpuDirect.Seconds(), probes/cpuTunnel.Seconds()
	b.ReportMetric(perCoreDirect, "direct-probes-per-s-per-core")
	b.ReportMetric(perCoreTunnel, "tunnel-probes-per-s-per-core")
	b.ReportMetric(perCoreTunnel/perCoreDirect, "probes-ratio-to-direct")
	b.ReportMetric(float64(cpuServer)/float64(time.Microsecond)/probes, "server-CPU-µs/probe")
	b.ReportMetric(probes/(cpuTunnel+cpuServer).Seconds()/perCoreDirect, "all-in-probes-ratio-to-direct")
	b.ReportMetric(serverHeap/1024/float64(n), "server-KiB/member")
}

// benchArms are n simulated members as two fleets: dialled directly, and through a tunnel server
// in a process of its own, to which an agent per member is connected. serverHeap is the heap the
// server holds once every agent is connected, over what it held before any was.
func benchArms(b *testing.B, n int) (direct, tunnelled []*multicluster.Member, server *benchServer, serverHeap float64) {
	b.Helper()
	sim := simmembers.Start(b, n, benchLatency)
	ns := fleettest.NewSet(b, lf)
	clusters := sim.Clusters(ns)
	direct = multicluster.MembersOf(simmembers.Resolver(b), clusters, multicluster.FleetOptions{})

	dir := b.TempDir()
	agentCA, readers := testcerts.NewCA("bench-tunnel-agents"), testcerts.NewCA("bench-tunnel-readers")
	agents := benchAgentAccounts(b, ns, dir, sim.Servers)
	spec := benchServerSpec{Kubeconfig: lf.Registry.Kubeconfig, ReaderCA: readers.PEM}
	spec.FrontendCert, spec.FrontendKey = testcerts.PEM(readers.Serving("127.0.0.1"))
	spec.AgentCert, spec.AgentKey = testcerts.PEM(agentCA.Serving("127.0.0.1"))
	for _, a := range agents {
		spec.Hosts = append(spec.Hosts, a.ID)
	}
	server = startBenchServer(b, spec)
	caFile := filepath.Join(dir, "agent-ca.crt")
	if err := os.WriteFile(caFile, agentCA.PEM, 0o600); err != nil {
		b.Fatal(err)
	}
	startBenchAgents(b, benchAgents{Address: server.agents, CAFile: caFile, Agents: agents})
	serverHeap = server.waitConnected(b)

	through := make([]v1alpha1.Cluster, len(clusters))
	for i := range clusters {
		through[i] = *clusters[i].DeepCopy()
		through[i].Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{Agent: benchAgentName(i)}
	}
	resolver, err := access.NewResolver(access.ResolverOptions{
		ClientIP: netip.MustParseAddr("127.0.0.1"),
		Tunnel: &tunnel.Dialer{Address: server.frontend, TLS: &tls.Config{
			Certificates: []tls.Certificate{readers.Client("bench", "system:masters")}, RootCAs: readers.Pool()}},
		Providers: map[string]access.Provider{simmembers.ProviderType: access.ProviderFunc(func(context.Context, *access.Request) (*access.Credentials, error) {
			return &access.Credentials{BearerToken: simmembers.Token}, nil
		})},
	})
	if err != nil {
		b.Fatal(err)
	}
	return direct, multicluster.MembersOf(resolver, through, multicluster.FleetOptions{}), server, serverHeap
}

func benchAgentName(i int) string { return fmt.Sprintf("agent-%05d", i) }

// benchAgentAccounts makes an agent's ServiceAccount in ns for each simulated server, dialling
// it, with a token for the tunnel's audience in dir.
func benchAgentAccounts(b *testing.B, ns, dir string, servers []string) []benchAgent {
	b.Helper()
	kube := kubernetes.NewForConfigOrDie(fleettest.Unthrottled(lf.Registry.Config))
	out := make([]benchAgent, len(servers))
	var g errgroup.Group
	g.SetLimit(16)
	for i, server := range servers {
		g.Go(func() error {
			ctx := context.Background()
			name := benchAgentName(i)
			_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
				Name: name, Annotations: map[string]string{agent.DestinationAnnotation: strings.TrimPrefix(server, "https://")},
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				Audiences: []string{agent.Audience}, ExpirationSeconds: ptr.To[int64](3600),
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			file := filepath.Join(dir, name+".token")
			out[i] = benchAgent{ID: access.TunnelHost(ns, name), TokenFile: file}
			return os.WriteFile(file, []byte(tr.Status.Token), 0o600)
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return out
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
