package tunnel_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
	"github.com/cluster-registry/sdk/testkit/testcerts"
	"github.com/cluster-registry/sdk/tunnel"
	"github.com/cluster-registry/sdk/tunnel/agent"
)

// lf is the package's local fleet: the registry, and member-1, which lives in a network of its
// own (localfleet's Isolated), as an edge cluster behind NAT does: the tests reach it through a
// tunnel server of their own, its agents run in its network, and nothing else dials it.
var lf *localfleet.Fleet

func TestMain(m *testing.M) {
	// BenchmarkTunnel's simulated members, and its agents, run in child processes of this binary.
	if code, child := simmembers.Main(); child {
		os.Exit(code)
	}
	if code, child := benchAgentsMain(); child {
		os.Exit(code)
	}
	if code, child := benchServerMain(); child {
		os.Exit(code)
	}
	fleetmain.Main(m, &lf, localfleet.Options{Members: 1, Isolated: []string{"member-1"}}, func(lf *localfleet.Fleet) error {
		// Delivery's decisions, and the ClusterProfiles the publisher writes.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return errors.Join(fleettest.InstallPlacementDecisionCRD(ctx, lf.Registry.Config), fleettest.InstallClusterProfileCRD(ctx, lf.Registry.Config))
	})
}

// rig is a tunnel server on loopback with the certificates its callers need.
type rig struct {
	server *tunnel.Server
	// frontend and agents are the server's two addresses.
	frontend, agents string
	// readers signs the frontend's and its readers' certificates; agentCAFile verifies the agents'
	// side for konnectivity's agent.
	readers     *testcerts.CA
	agentCA     *testcerts.CA
	agentCAFile string
	dir         string
	// stop stops the running server.
	stop func(*testing.T)
	// options changes the server's options from the rig's, on every start.
	options func(*tunnel.ServerOptions)

	mu      sync.Mutex
	logs    []string
	dialers []*tunnel.Dialer // closed when the test ends
}

// startRig starts a tunnel server that authenticates agents against the fleet's registry.
func startRig(t *testing.T) *rig {
	t.Helper()
	return startRigWith(t, func(*tunnel.ServerOptions) {})
}

// startRigWith is startRig, its server's options changed by options.
func startRigWith(t *testing.T, options func(*tunnel.ServerOptions)) *rig {
	t.Helper()
	r := &rig{readers: testcerts.NewCA("tunnel-readers"), agentCA: testcerts.NewCA("tunnel-agents"), dir: t.TempDir(), options: options}
	r.agentCAFile = filepath.Join(r.dir, "agent-ca.crt")
	require.NoError(t, os.WriteFile(r.agentCAFile, r.agentCA.PEM, 0o600))
	fl, al := listen(t), listen(t)
	r.frontend, r.agents = fl.Addr().String(), al.Addr().String()
	r.serveOn(t, fl, al)
	t.Cleanup(func() { r.stop(t) })
	t.Cleanup(r.closeDialers)
	return r
}

func (r *rig) closeDialers() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.dialers {
		_ = d.Close()
	}
}

// serveOn runs a new tunnel server on the two listeners until stop.
func (r *rig) serveOn(t *testing.T, frontend, agents net.Listener) {
	t.Helper()
	opts := tunnel.ServerOptions{
		Registry:    kubernetes.NewForConfigOrDie(lf.Registry.Config),
		FrontendTLS: &tls.Config{Certificates: []tls.Certificate{r.readers.Serving("127.0.0.1")}, ClientCAs: r.readers.Pool()},
		AgentTLS:    &tls.Config{Certificates: []tls.Certificate{r.agentCA.Serving("127.0.0.1")}},
		// Connected agents' tokens reviewed again often, for TestJoinThroughTheTunnel's unjoin.
		AgentRecheck: 500 * time.Millisecond,
		Logger:       funcr.New(r.log, funcr.Options{Verbosity: 1}),
	}
	r.options(&opts)
	server, err := tunnel.NewServer(opts)
	require.NoError(t, err)
	r.server = server
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Serve(ctx, frontend, agents) }()
	r.stop = func(t *testing.T) {
		cancel()
		require.NoError(t, <-done)
		r.stop = func(*testing.T) {}
	}
}

// restart stops the tunnel server, as a crash or a rollout does (every tunnel through it
// breaks), and starts a new one at the same addresses.
func (r *rig) restart(t *testing.T) {
	t.Helper()
	r.stop(t)
	var fl, al net.Listener
	require.Eventually(t, func() bool {
		var err error
		if fl == nil {
			fl, _ = net.Listen("tcp", r.frontend)
		}
		if al == nil {
			al, err = net.Listen("tcp", r.agents)
		}
		return fl != nil && al != nil && err == nil
	}, 10*time.Second, 50*time.Millisecond, "the tunnel server's addresses were not free again")
	r.serveOn(t, fl, al)
}

func (r *rig) log(prefix, args string) {
	r.mu.Lock()
	r.logs = append(r.logs, prefix+args)
	r.mu.Unlock()
}

// logged reports whether the server logged a line holding s.
func (r *rig) logged(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.logs {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// dialer is a reader's Dialer, with a client certificate the frontend accepts.
func (r *rig) dialer() *tunnel.Dialer { return r.dialerAt(r.frontend) }

// dialerAt is dialer, reaching the frontend through address (a balancer in front of it).
func (r *rig) dialerAt(address string) *tunnel.Dialer {
	d := &tunnel.Dialer{Address: address, TLS: &tls.Config{
		Certificates: []tls.Certificate{r.readers.Client("a-reader", "system:masters")},
		RootCAs:      r.readers.Pool(),
	}}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dialers = append(r.dialers, d)
	return d
}

// agentAccount makes the ServiceAccount name in ns that an agent authenticates as, saying that its
// agent dials destination, and returns a file holding a bound token for the tunnel's audience.
// A destination other than member-1's API server is a listener of the test's, which agents in
// member-1's network reach through a bridge.
func (r *rig) agentAccount(t *testing.T, ns, name, destination string) string {
	t.Helper()
	if destination != memberAddress(t) {
		require.NoError(t, lf.Members[0].Bridge(destination))
	}
	ctx := fleettest.Context(t, time.Minute)
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: name, Annotations: map[string]string{agent.DestinationAnnotation: destination},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{agent.Audience}, ExpirationSeconds: ptr.To[int64](3600),
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	file := filepath.Join(r.dir, ns+"-"+name+".token")
	require.NoError(t, os.WriteFile(file, []byte(tr.Status.Token), 0o600))
	return file
}

// startAgent runs konnectivity's stock agent in member-1's network, with the token in tokenFile,
// claiming claim as its identity (its agent ID and host identifier), until the test ends.
func (r *rig) startAgent(t *testing.T, tokenFile, claim string) *exec.Cmd {
	t.Helper()
	assets, err := localfleet.AssetsDir("")
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(r.agents)
	require.NoError(t, err)
	require.NoError(t, lf.Members[0].Bridge(r.agents))
	cmd := atTheEdge(filepath.Join(assets, "konnectivity-agent"),
		"--proxy-server-host="+host, "--proxy-server-port="+port, "--ca-cert="+r.agentCAFile,
		"--agent-id="+claim, "--agent-identifiers=host="+claim,
		"--service-account-token-path="+tokenFile,
		"--health-server-port="+freePort(t), "--admin-server-port="+freePort(t),
		"--sync-interval=200ms", "--sync-interval-cap=1s", "--v=1")
	start(t, "agent claiming "+claim, cmd)
	return cmd
}

// tunnelledMember runs member-1's agent in ns, its ServiceAccount member-1-agent dialling
// destination, waits for it to connect, and makes ns's Cluster member-1 say it is reached through
// it. It returns the agent's name, its process and its token's file.
func (r *rig) tunnelledMember(t *testing.T, ns, destination string) (host string, agent *exec.Cmd, token string) {
	t.Helper()
	host = access.TunnelHost(ns, "member-1-agent")
	token = r.agentAccount(t, ns, "member-1-agent", destination)
	agent = r.startAgent(t, token, host)
	r.waitConnected(t, host)
	tunnelled(t, ns, "member-1-agent")
	return host, agent, token
}

// waitConnected waits until an agent answering for host is connected.
func (r *rig) waitConnected(t *testing.T, host string) {
	t.Helper()
	require.Eventually(t, func() bool { return r.server.Connected(host) }, time.Minute, 50*time.Millisecond,
		"no agent for %s connected to the tunnel server", host)
}

// start starts cmd, a process of the test's (konnectivity's agent, one of the command's), and
// kills it when the test ends, showing the tail of what it said if the test failed.
func start(t *testing.T, what string, cmd *exec.Cmd) {
	t.Helper()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start(), "starting %s (hack/build-testbins.sh builds konnectivity's agent)", what)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s:\n%s", what, tail(out.String(), 3000))
		}
	})
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return l
}

// bridgedListen listens on a loopback port of the test's and bridges it into member-1's network,
// where agents dial it as the destination their ServiceAccount names. A port free here may be
// taken there (the member's own servers listen in its network, and CI once drew one of theirs:
// "bind: address already in use"), so another is drawn.
func bridgedListen(t testing.TB) net.Listener {
	t.Helper()
	var err error
	for range 20 {
		l := listen(t)
		if err = lf.Members[0].Bridge(l.Addr().String()); err == nil {
			return l
		}
		l.Close()
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	require.NoError(t, err, "bridging a listener into member-1's network")
	return nil
}

func freePort(t *testing.T) string {
	l := listen(t)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// recorder forwards TCP connections to target and keeps every byte it carries, both ways: a
// stand-in in the tunnel's path, between the agent and the member's API server.
type recorder struct {
	addr string
	mu   sync.Mutex
	seen bytes.Buffer
	// conns counts the connections it accepted, open those not yet ended.
	conns, open int
}

func record(t *testing.T, target string) *recorder {
	t.Helper()
	l := bridgedListen(t)
	t.Cleanup(func() { l.Close() })
	rec := &recorder{addr: l.Addr().String()}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			rec.mu.Lock()
			rec.conns++
			rec.open++
			rec.mu.Unlock()
			go rec.forward(c, target)
		}
	}()
	return rec
}

func (rec *recorder) forward(c net.Conn, target string) {
	defer func() {
		c.Close()
		rec.mu.Lock()
		rec.open--
		rec.mu.Unlock()
	}()
	if target == "" {
		_, _ = io.Copy(rec.writer(), c)
		return
	}
	up, err := dialTarget(target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(io.MultiWriter(c, rec.writer()), up) }()
	_, _ = io.Copy(io.MultiWriter(up, rec.writer()), c)
}

func (rec *recorder) writer() io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.seen.Write(p)
	})
}

// carried reports how many bytes it carried, and whether secret was among them.
func (rec *recorder) carried(secret string) (int, bool) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.seen.Len(), bytes.Contains(rec.seen.Bytes(), []byte(secret))
}

func (rec *recorder) connections() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.conns
}

// openConnections is how many of its connections have not ended.
func (rec *recorder) openConnections() int {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.open
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// dialTarget opens a connection to target: member-1's API server, in its network of its own, or a
// listener of the test's.
func dialTarget(target string) (net.Conn, error) {
	m := lf.Members[0]
	if target == strings.TrimPrefix(m.URL(), "https://") {
		return m.Config.Dial(context.Background(), "tcp", target)
	}
	return net.Dial("tcp", target)
}

// atTheEdge is a command that runs in member-1's network, as one at the edge does.
func atTheEdge(name string, args ...string) *exec.Cmd {
	return lf.Members[0].Command(context.Background(), name, args...)
}

// registryAddress is the registry's API server as host:port.
func registryAddress() string { return strings.TrimPrefix(lf.Registry.URL(), "https://") }

// memberAddress is member-1's API server as host:port, which only its own network reaches.
func memberAddress(t *testing.T) string {
	t.Helper()
	u := lf.Members[0].URL()
	return strings.TrimPrefix(u, "https://")
}

// tunnelled makes ns's copy of member-1's Cluster say it is reached through agent's tunnel, and
// pins its token Secret to that agent.
func tunnelled(t *testing.T, ns, agent string) {
	t.Helper()
	ctx := fleettest.Context(t, time.Minute)
	pinToAgent(t, ns, agent)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	c, err := clusters.Get(ctx, "member-1", metav1.GetOptions{})
	require.NoError(t, err)
	c.Spec.KubernetesAPIEndpoints.Tunnel = &v1alpha1.Tunnel{Agent: agent}
	_, err = clusters.Update(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// pinToAgent annotates member-1's token Secret in ns: its token may be sent through agent only
// ("" for members dialled directly).
func pinToAgent(t *testing.T, ns, agent string) {
	t.Helper()
	secrets := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns)
	ctx := fleettest.Context(t, time.Minute)
	s, err := secrets.Get(ctx, "member-1-token", metav1.GetOptions{})
	require.NoError(t, err)
	if agent == "" {
		delete(s.Annotations, v1alpha1.TunnelAgentAnnotation)
	} else {
		s.Annotations[v1alpha1.TunnelAgentAnnotation] = agent
	}
	_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// resolverFor is a Resolver of the registry's Secrets, reaching tunnelled members through d.
func resolverFor(t *testing.T, d access.TunnelDialer) *access.Resolver {
	t.Helper()
	r, err := access.NewResolver(access.ResolverOptions{
		Secrets: access.SecretsFromClient(kubernetes.NewForConfigOrDie(lf.Registry.Config)),
		Tunnel:  d,
		Logger:  logr.Discard(),
	})
	require.NoError(t, err)
	return r
}

// cluster is ns's Cluster member-1.
func cluster(t *testing.T, ns string) *v1alpha1.Cluster {
	t.Helper()
	c, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns).
		Get(fleettest.Context(t, time.Minute), "member-1", metav1.GetOptions{})
	require.NoError(t, err)
	return c
}

// memberToken is the bearer token member-1's Cluster points at.
func memberToken(t *testing.T, ns string) string {
	t.Helper()
	s, err := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Secrets(ns).
		Get(fleettest.Context(t, time.Minute), "member-1-token", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, s.Data[v1alpha1.SecretTokenKey])
	return string(s.Data[v1alpha1.SecretTokenKey])
}

// probe is the Ready condition a health controller with r finds for ns's member-1, at once.
func probe(t *testing.T, ns string, r *access.Resolver) metav1.Condition {
	t.Helper()
	c, err := health.New(health.Options{
		Registry: versioned.NewForConfigOrDie(lf.Registry.Config), Kube: kubernetes.NewForConfigOrDie(lf.Registry.Config),
		Resolver: r, Namespaces: []string{ns}, FailureThreshold: 1, SuccessThreshold: 1, KeepConnections: true,
	})
	require.NoError(t, err)
	probed, err := c.ProbeOnce(fleettest.Context(t, time.Minute))
	require.NoError(t, err)
	require.Len(t, probed, 1)
	return probed[0].Condition
}

// listNamespaces reads member-1's namespaces as ns's Cluster says to reach it.
func listNamespaces(ctx context.Context, r *access.Resolver, c *v1alpha1.Cluster) error {
	a, err := r.Resolve(ctx, c)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfigAndClient(a.Config, a.HTTPClient)
	if err != nil {
		return err
	}
	_, err = kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	return nil
}
