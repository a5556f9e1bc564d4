package tunnel_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
	"github.com/cluster-registry/sdk/tunnel"
)

// The benchmark's tunnel server runs in a child process of its own (this test binary, started
// again with benchServerEnv naming a file of its spec), so that the benchmark's CPU figures hold
// the readers alone, the server's are read apart, and its heap per member is its own.

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

// benchServer is the parent's handle on the server child.
type benchServer struct {
	frontend, agents string
	cmd              *exec.Cmd
	in               *bufio.Writer
	out              *bufio.Scanner
}

func startBenchServer(b *testing.B, spec benchServerSpec) *benchServer {
	b.Helper()
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(b.TempDir(), "server.json")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		b.Fatal(err)
	}
	s := &benchServer{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	s.cmd.Env = append(os.Environ(), benchServerEnv+"="+file)
	s.cmd.Stderr = os.Stderr
	stdin, err := s.cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = s.cmd.Wait() })
	s.in, s.out = bufio.NewWriter(stdin), bufio.NewScanner(stdout)
	addrs := strings.Fields(s.ask(b, ""))
	if len(addrs) != 2 {
		b.Fatalf("the tunnel server did not start: %q", addrs)
	}
	s.frontend, s.agents = addrs[0], addrs[1]
	return s
}

// ask sends the child a request line (none when empty) and returns its answer line.
func (s *benchServer) ask(b *testing.B, request string) string {
	b.Helper()
	if request != "" {
		fmt.Fprintln(s.in, request)
		if err := s.in.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	if !s.out.Scan() {
		b.Fatalf("the tunnel server exited: %v", s.out.Err())
	}
	return s.out.Text()
}

// waitConnected waits until every agent is connected, and returns the server's settled heap.
func (s *benchServer) waitConnected(b *testing.B) float64 {
	b.Helper()
	answer := s.ask(b, "wait")
	heap, err := strconv.ParseFloat(answer, 64)
	if err != nil {
		b.Fatalf("waiting for the agents: %s", answer)
	}
	return heap
}

// cpu is the server's CPU time so far.
func (s *benchServer) cpu(b *testing.B) time.Duration {
	b.Helper()
	d, err := time.ParseDuration(s.ask(b, "cpu"))
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchServerMain runs the server when this process is the child; call it first in TestMain.
func benchServerMain() (code int, child bool) {
	file := os.Getenv(benchServerEnv)
	if file == "" {
		return 0, false
	}
	if err := serveBench(file); err != nil {
		fmt.Fprintln(os.Stderr, "bench tunnel server:", err)
		return 2, true
	}
	return 0, true
}

func serveBench(file string) error {
	var spec benchServerSpec
	raw, err := os.ReadFile(file)
	if err == nil {
		err = json.Unmarshal(raw, &spec)
	}
	if err != nil {
		return err
	}
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
	fmt.Println(fl.Addr(), al.Addr())
	requests := bufio.NewScanner(os.Stdin)
	for requests.Scan() {
		switch requests.Text() {
		case "wait":
			for _, h := range spec.Hosts {
				for !server.Connected(h) {
					time.Sleep(20 * time.Millisecond)
				}
			}
			heap, _ := simmembers.SettledHeapAndGoroutines()
			fmt.Println(float64(heap) - float64(heap0))
		case "cpu":
			fmt.Println(processCPU())
		}
	}
	return nil
}
