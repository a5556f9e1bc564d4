package localfleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// An isolated server runs in a network namespace of its own, as a member behind NAT does: a
// helper process (this same program, started again with isolatedEnv set; see isolated_child.go)
// is born in a new network namespace, starts kube-apiserver and etcd there, and does what this
// process asks of it over its stdin and stdout. Nothing outside the namespace can dial the API
// server. This process alone reaches it, through a Unix socket the helper serves (a Unix socket
// is a file, which both sides see), for a test's own checks on the member; programs that should
// reach the member as a registry would go through a tunnel instead.

// isolation is this process's side of an isolated server: its helper, and the bridges out.
type isolation struct {
	cmd    *exec.Cmd
	exited chan struct{}
	// socket is the helper's Unix socket, which leads to the API server.
	socket string
	// dir holds the bridges' sockets; this side's own.
	dir string

	mu  sync.Mutex // serializes requests
	in  *json.Encoder
	out *bufio.Scanner

	bridgeMu sync.Mutex // serializes bridges, and guards the map
	bridges  map[string]net.Listener
	wg       sync.WaitGroup
}

// isolatedRequest is one request to the helper; isolatedAnswer its answer.
type isolatedRequest struct {
	Op string `json:"op"`
	// AddUser's.
	Name   string   `json:"name,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Bridge's: listen on Address in the namespace, and carry each connection to Socket.
	Address string `json:"address,omitempty"`
	Socket  string `json:"socket,omitempty"`
	// Workloads'.
	Member string `json:"member,omitempty"`
	Nodes  int    `json:"nodes,omitempty"`
}

type isolatedAnswer struct {
	Error string `json:"error,omitempty"`
	// The first answer, once the server is up: its admin kubeconfig (a file of the helper's), the
	// socket that leads to its API server, and its version.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Socket     string `json:"socket,omitempty"`
	Version    string `json:"version,omitempty"`
	// AddUser's kubeconfig.
	Data []byte `json:"data,omitempty"`
}

// isolatedArgs is what the helper starts with, in isolatedEnv.
type isolatedArgs struct {
	Assets  string        `json:"assets"`
	Timeout time.Duration `json:"timeout"`
	Port    int           `json:"port"`
}

// isolatedEnv carries isolatedArgs to the helper, and makes the program one.
const isolatedEnv = "LOCALFLEET_ISOLATED_SERVER"

// startIsolatedServer starts a server in a network namespace of its own.
func startIsolatedServer(assets string, timeout time.Duration) (*Server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("isolated member: finding this program to start its helper: %w", err)
	}
	// The API server's port is one that is free here too, so that a direct dial from this network
	// is refused rather than answered by whatever else holds the port.
	port, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	args, err := json.Marshal(isolatedArgs{Assets: assets, Timeout: timeout, Port: port})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "localfleet-isolated-")
	if err != nil {
		return nil, err
	}
	iso := &isolation{dir: dir, exited: make(chan struct{}), bridges: map[string]net.Listener{}}
	iso.cmd = exec.Command(self)
	iso.cmd.Env = append(os.Environ(), isolatedEnv+"="+string(args))
	iso.cmd.Stderr = os.Stderr
	iso.cmd.SysProcAttr = namespaceAttr()
	s, err := iso.start()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("isolated member: %w", err)
	}
	return s, nil
}

func (iso *isolation) start() (*Server, error) {
	in, err := iso.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := iso.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := iso.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting its helper in a network namespace of its own (this needs root, or unprivileged user namespaces): %w", err)
	}
	go func() { _ = iso.cmd.Wait(); close(iso.exited) }()
	iso.in, iso.out = json.NewEncoder(in), bufio.NewScanner(out)
	iso.out.Buffer(nil, 1<<20)
	first, err := iso.read()
	if err != nil {
		iso.kill()
		return nil, err
	}
	iso.socket = first.Socket
	cfg, err := clientcmd.BuildConfigFromFlags("", first.Kubeconfig)
	if err != nil {
		iso.kill()
		return nil, fmt.Errorf("reading its admin kubeconfig: %w", err)
	}
	// Every connection goes to the helper's socket, whatever the address: the API server's own
	// address is in the namespace, where this process cannot dial.
	cfg.Dial = iso.DialAPIServer
	return &Server{Config: cfg, Kubeconfig: first.Kubeconfig, Version: first.Version, isolated: iso}, nil
}

// DialAPIServer opens a connection to the isolated API server, through the helper's socket.
func (iso *isolation) DialAPIServer(ctx context.Context, _, _ string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "unix", iso.socket)
}

// call sends the helper one request and waits for its answer.
func (iso *isolation) call(req isolatedRequest) (isolatedAnswer, error) {
	iso.mu.Lock()
	defer iso.mu.Unlock()
	if err := iso.in.Encode(req); err != nil {
		return isolatedAnswer{}, fmt.Errorf("isolated member: asking its helper to %s: %w", req.Op, err)
	}
	a, err := iso.read()
	if err != nil {
		return a, fmt.Errorf("isolated member: %s: %w", req.Op, err)
	}
	return a, nil
}

func (iso *isolation) read() (isolatedAnswer, error) {
	var a isolatedAnswer
	if !iso.out.Scan() {
		return a, fmt.Errorf("its helper exited (%v); what it said is on stderr", iso.out.Err())
	}
	if err := json.Unmarshal(iso.out.Bytes(), &a); err != nil {
		return a, fmt.Errorf("reading its helper's answer: %w", err)
	}
	if a.Error != "" {
		return a, errors.New(a.Error)
	}
	return a, nil
}

// do sends a request that answers nothing but an error.
func (iso *isolation) do(op string) error {
	_, err := iso.call(isolatedRequest{Op: op})
	return err
}

// bridge lets programs in the namespace reach address, a loopback host:port of this network, at
// the same address there.
func (iso *isolation) bridge(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		return fmt.Errorf("isolated member: bridging %q: want a loopback IP address and port", address)
	}
	iso.bridgeMu.Lock()
	defer iso.bridgeMu.Unlock()
	if _, done := iso.bridges[address]; done {
		return nil
	}
	socket := filepath.Join(iso.dir, "bridge-"+strconv.Itoa(len(iso.bridges))+".sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		return fmt.Errorf("isolated member: bridging %s: %w", address, err)
	}
	iso.wg.Go(func() { forward(l, func() (net.Conn, error) { return net.Dial("tcp", address) }) })
	if _, err := iso.call(isolatedRequest{Op: "bridge", Address: address, Socket: socket}); err != nil {
		_ = l.Close()
		return err
	}
	iso.bridges[address] = l
	return nil
}

// stop stops the helper, which stops the server, and closes the bridges.
func (iso *isolation) stop() error {
	err := iso.do("stop")
	select {
	case <-iso.exited:
	case <-time.After(controlPlaneTimeout):
		iso.kill()
		err = errors.Join(err, errors.New("isolated member: its helper did not exit; killed"))
	}
	iso.bridgeMu.Lock()
	for _, l := range iso.bridges {
		_ = l.Close()
	}
	iso.bridgeMu.Unlock()
	iso.wg.Wait()
	return errors.Join(err, os.RemoveAll(iso.dir))
}

func (iso *isolation) kill() {
	_ = iso.cmd.Process.Kill()
	<-iso.exited
}

// freeLoopbackPort is a port no one listens on at 127.0.0.1 now.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
