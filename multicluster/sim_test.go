package multicluster

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// Simulated members stand in for hundreds of API servers, which do not fit on a small machine:
// TLS servers on their own 127.x.y.z addresses speaking the few paths the benchmarks use, each
// with injected latency. They run in a child process (this test binary, re-executed with
// simMembersEnv set) so that the parent's heap and goroutine counts hold only the client side.
const (
	simMembersEnv = "CLUSTERREGISTRY_SIM_MEMBERS"
	simLatencyEnv = "CLUSTERREGISTRY_SIM_LATENCY"
	simToken      = "sim-token"
)

// simMembersMain is the child's main: it serves the members, prints their addresses and CA as one
// JSON line, and exits when its standard input closes.
func simMembersMain() int {
	n, err := strconv.Atoi(os.Getenv(simMembersEnv))
	latency, err2 := time.ParseDuration(os.Getenv(simLatencyEnv))
	if err != nil || err2 != nil || n < 1 || n > 60000 {
		fmt.Fprintln(os.Stderr, "sim members: bad", simMembersEnv, "or", simLatencyEnv)
		return 2
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sim-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)

	out := struct {
		CA      string   `json:"ca"`
		Servers []string `json:"servers"`
	}{CA: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))}
	for i := range n {
		ip := net.IPv4(127, 1, byte(i/250), byte(i%250+1))
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: ip.String()},
			IPAddresses: []net.IP{ip}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &leafKey.PublicKey, caKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sim members:", err)
			return 1
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "sim members:", err)
			return 1
		}
		handshakes := new(atomic.Int64)
		config := &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: leafKey}},
			GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
				handshakes.Add(1)
				return nil, nil
			},
		}
		go serveSimH2(ln, config, func(path, auth, accept string) (int, string, string) {
			return simAnswer(path, auth, accept, handshakes)
		}, latency)
		out.Servers = append(out.Servers, "https://"+ln.Addr().String())
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent is done
	return 0
}

// simAnswer answers GET /version, a GET or server-side apply of a namespaced ConfigMap with the
// ConfigMap (in protobuf when the client accepts it, as API servers do), and the debug paths: /debug/handshakes with the member's TLS
// handshake count, /debug/cpu with this process's CPU time in microseconds. The server sends
// answers other than debug ones after the latency.
func simAnswer(path, auth, accept string, handshakes *atomic.Int64) (status int, contentType, body string) {
	const json = "application/json"
	if auth != "Bearer "+simToken {
		return http.StatusUnauthorized, json, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401}`
	}
	path, _, _ = strings.Cut(path, "?")
	switch {
	case path == "/debug/handshakes":
		return http.StatusOK, "text/plain", strconv.FormatInt(handshakes.Load(), 10)
	case path == "/debug/cpu":
		return http.StatusOK, "text/plain", strconv.FormatInt(processCPU().Microseconds(), 10)
	case path == "/version":
		return http.StatusOK, json, `{"major":"1","minor":"36","gitVersion":"v1.36.3"}`
	case strings.HasPrefix(path, "/api/v1/namespaces/") && strings.Contains(path, "/configmaps/"):
		parts := strings.Split(path, "/")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: parts[4], Name: parts[6]}, Data: map[string]string{"k": "v"}}
		if strings.HasPrefix(accept, runtime.ContentTypeProtobuf) {
			data, err := runtime.Encode(simProtobuf, cm)
			if err != nil {
				return http.StatusInternalServerError, json, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`
			}
			return http.StatusOK, runtime.ContentTypeProtobuf, string(data)
		}
		return http.StatusOK, json, fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":%q,"name":%q},"data":{"k":"v"}}`, parts[4], parts[6])
	}
	return http.StatusNotFound, json, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`
}

// simProtobuf encodes core/v1 objects as API servers do for clients that accept protobuf.
var simProtobuf = clientgoscheme.Codecs.EncoderForVersion(
	protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme), corev1.SchemeGroupVersion)

// simMembers is the parent's handle on a child serving n simulated members.
type simMembers struct {
	CA      []byte
	Servers []string
}

func startSimMembers(tb testing.TB, n int, latency time.Duration) *simMembers {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), simMembersEnv+"="+strconv.Itoa(n), simLatencyEnv+"="+latency.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})
	var out struct {
		CA      string   `json:"ca"`
		Servers []string `json:"servers"`
	}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil || json.Unmarshal(line, &out) != nil || len(out.Servers) != n {
		tb.Fatalf("simulated members did not start: %v", err)
	}
	return &simMembers{CA: []byte(out.CA), Servers: out.Servers}
}

// clusters are Clusters for the simulated members, authenticated by the "sim" provider type.
func (s *simMembers) clusters() []v1alpha1.Cluster {
	out := make([]v1alpha1.Cluster, len(s.Servers))
	for i, server := range s.Servers {
		out[i] = v1alpha1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "sim", Name: fmt.Sprintf("member-%04d", i), UID: "sim-uid"},
			Spec: v1alpha1.ClusterSpec{
				KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
					ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: server}},
					CABundle:        s.CA,
				},
				AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{provider("sim", "sim", nil)}},
			},
		}
	}
	return out
}

// simResolver resolves simulated members with their fixed token.
func simResolver(tb testing.TB) *Resolver {
	tb.Helper()
	r, err := NewResolver(ResolverOptions{ClientIP: testClientIP, Providers: map[string]Provider{
		"sim": ProviderFunc(func(context.Context, *Request) (*Credentials, error) {
			return &Credentials{BearerToken: simToken}, nil
		}),
	}})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// Simulated members answer through a Fleet as real ones do, and count handshakes: a check on
// the benchmarks' own instrument.
func TestSimulatedMembers(t *testing.T) {
	integration(t)
	sim := startSimMembers(t, 3, time.Millisecond)
	members := StaticFleet(simResolver(t), sim.clusters(), FleetOptions{}).Members()
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
		cm, err := kube.CoreV1().ConfigMaps("default").Apply(ctx, corev1ac.ConfigMap("fleet-demo", "default"), metav1.ApplyOptions{FieldManager: "sim-test"})
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
