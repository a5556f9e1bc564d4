package tunnel_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/replicaproc"
	"github.com/cluster-registry/sdk/testkit/simmembers"
	"github.com/cluster-registry/sdk/tunnel"
)

// The benchmark's tunnel server runs in a child process of its own (package replicaproc), so
// that the benchmark's CPU figures hold the readers alone, the server's are read apart, and its
// heap per member is its own.

const benchServerEnv = "TUNNEL_BENCH_SERVER"

// benchServerSpec is the server's: the registry it authenticates agents against, its
// certificates, and the agents whose connection "wait" waits for.
type benchServerSpec struct {
	Kubeconfig   string   `json:"kubeconfig"`
	FrontendCert []byte   `json:"frontendCert"`
	FrontendKey  []byte   `json:"frontendKey"`
	ReaderCA     []byte   `json:"readerCA"`
	AgentCert    []byte   `json:"agentCert"`
	AgentKey     []byte   `json:"agentKey"`
	Hosts        []string `json:"hosts"`
}

// benchServerAnswer is the child's answer: its addresses ("addresses"), its heap over what it
// held before any agent connected ("wait"), or its CPU time ("cpu").
type benchServerAnswer struct {
	Frontend, Agents string
	Heap             float64
	CPU              time.Duration
}

// benchServer is the parent's handle on the server child.
type benchServer struct {
	frontend, agents string
	proc             *replicaproc.Proc
}

func startBenchServer(b *testing.B, spec benchServerSpec) *benchServer {
	b.Helper()
	s := &benchServer{proc: replicaproc.Start(b, benchServerEnv, spec)}
	var a benchServerAnswer
	s.proc.Ask(b, "addresses", &a)
	s.frontend, s.agents = a.Frontend, a.Agents
	return s
}

// waitConnected waits until every agent is connected, and returns the server's settled heap.
func (s *benchServer) waitConnected(b *testing.B) float64 {
	b.Helper()
	var a benchServerAnswer
	s.proc.Ask(b, "wait", &a)
	return a.Heap
}

// cpu is the server's CPU time so far.
func (s *benchServer) cpu(b *testing.B) time.Duration {
	b.Helper()
	var a benchServerAnswer
	s.proc.Ask(b, "cpu", &a)
	return a.CPU
}

// benchServerMain runs the server when this process is the child; call it first in TestMain.
func benchServerMain() (code int, child bool) {
	return replicaproc.Main(benchServerEnv, serveBench)
}

func serveBench(spec benchServerSpec, in io.Reader, out io.Writer) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", spec.Kubeconfig)
	if err != nil {
		return err
	}
	frontendCert, err := tls.X509KeyPair(spec.FrontendCert, spec.FrontendKey)
	if err != nil {
		return err
	}
	agentCert, err := tls.X509KeyPair(spec.AgentCert, spec.AgentKey)
	if err != nil {
		return err
	}
	readers := x509.NewCertPool()
	readers.AppendCertsFromPEM(spec.ReaderCA)
	heap0, _ := simmembers.SettledHeapAndGoroutines()
	server, err := tunnel.NewServer(tunnel.ServerOptions{
		Registry:    kubernetes.NewForConfigOrDie(fleettest.Unthrottled(cfg)),
		FrontendTLS: &tls.Config{Certificates: []tls.Certificate{frontendCert}, ClientCAs: readers},
		AgentTLS:    &tls.Config{Certificates: []tls.Certificate{agentCert}},
		AnyReader:   true, Logger: logr.Discard(),
	})
	if err != nil {
		return err
	}
	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	al, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = server.Serve(ctx, fl, al) }()
	return replicaproc.Serve(in, out, func(request string) (any, error) {
		switch request {
		case "addresses":
			return benchServerAnswer{Frontend: fl.Addr().String(), Agents: al.Addr().String()}, nil
		case "wait":
			for _, h := range spec.Hosts {
				for !server.Connected(h) {
					time.Sleep(20 * time.Millisecond)
				}
			}
			heap, _ := simmembers.SettledHeapAndGoroutines()
			return benchServerAnswer{Heap: float64(heap) - float64(heap0)}, nil
		case "cpu":
			return benchServerAnswer{CPU: processCPU()}, nil
		}
		return nil, fmt.Errorf("unknown request %q", request)
	})
}
