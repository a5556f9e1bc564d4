package localfleet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
)

// The helper's side of an isolated server (isolated.go): when this program was started as one,
// it serves its parent and exits, before anything else of the program runs.
func init() {
	raw, ok := os.LookupEnv(isolatedEnv)
	if !ok {
		return
	}
	_ = os.Unsetenv(isolatedEnv) // the servers it starts are no helpers
	os.Exit(runHelper(raw))
}

// helper runs one server in its network namespace for the parent on the other end of its stdin
// and stdout.
type helper struct {
	args   isolatedArgs
	server *Server

	mu        sync.Mutex
	listeners []net.Listener
	wg        sync.WaitGroup
}

// runHelper starts the server, answers the parent's requests until it says stop or goes away, and
// stops the server. It returns the exit code.
func runHelper(raw string) int {
	// A Ctrl-C reaches the terminal's whole process group, this helper too, which would die and
	// leave its server running: the parent's clean-up asks it to stop (or its stdin closes).
	signal.Ignore(os.Interrupt)
	answers := json.NewEncoder(os.Stdout)
	os.Stdout = os.Stderr // nothing else may write between the answers
	h := &helper{}
	first, err := h.start(raw)
	if err != nil {
		_ = answers.Encode(isolatedAnswer{Error: err.Error()})
		return 1
	}
	_ = answers.Encode(first)
	requests := bufio.NewScanner(os.Stdin)
	for requests.Scan() {
		var req isolatedRequest
		if err := json.Unmarshal(requests.Bytes(), &req); err != nil {
			_ = answers.Encode(isolatedAnswer{Error: fmt.Sprintf("reading a request: %v", err)})
			continue
		}
		a := h.serve(req)
		_ = answers.Encode(a)
		if req.Op == "stop" {
			return 0
		}
	}
	// The parent is gone: leave no server behind.
	_ = h.stop()
	return 0
}

func (h *helper) start(raw string) (isolatedAnswer, error) {
	if err := json.Unmarshal([]byte(raw), &h.args); err != nil {
		return isolatedAnswer{}, fmt.Errorf("reading %s: %w", isolatedEnv, err)
	}
	// A new network namespace has a loopback interface, down.
	if err := loopbackUp(); err != nil {
		return isolatedAnswer{}, err
	}
	s, err := startServer(h.args.Assets, h.args.Timeout, h.args.Port)
	if err != nil {
		return isolatedAnswer{}, err
	}
	h.server = s
	u, err := url.Parse(s.Config.Host)
	if err != nil {
		return isolatedAnswer{}, errors.Join(err, s.Stop())
	}
	socket := filepath.Join(s.dir, "apiserver.sock")
	if err := h.listen("unix", socket, func() (net.Conn, error) { return net.Dial("tcp", u.Host) }); err != nil {
		return isolatedAnswer{}, errors.Join(err, s.Stop())
	}
	return isolatedAnswer{Kubeconfig: s.Kubeconfig, Socket: socket, Version: s.Version}, nil
}

// listen forwards every connection to address to what dial opens, until stop.
func (h *helper) listen(network, address string, dial func() (net.Conn, error)) error {
	l, err := net.Listen(network, address)
	if err != nil {
		return fmt.Errorf("listening on %s in the member's network: %w", address, err)
	}
	h.mu.Lock()
	h.listeners = append(h.listeners, l)
	h.mu.Unlock()
	h.wg.Go(func() { forward(l, dial) })
	return nil
}

// serve does what one request asks.
func (h *helper) serve(req isolatedRequest) isolatedAnswer {
	s := h.server
	var err error
	var a isolatedAnswer
	switch req.Op {
	case "adduser":
		a.Data, err = s.AddUser(req.Name, req.Groups...)
	case "stop-apiserver":
		err = s.StopAPIServer()
	case "start-apiserver":
		err = s.StartAPIServer()
	case "reinstall":
		err = s.Reinstall()
	case "pause-etcd":
		err = s.PauseEtcd()
	case "resume-etcd":
		err = s.ResumeEtcd()
	case "pause-nodes":
		err = s.PauseNodes()
	case "resume-nodes":
		err = s.ResumeNodes()
	case "workloads":
		s.workloads, err = startWorkloads(context.Background(), h.args.Assets, s, req.Member, req.Nodes)
	case "bridge":
		err = h.listen("tcp", req.Address, func() (net.Conn, error) { return net.Dial("unix", req.Socket) })
	case "stop":
		err = h.stop()
	default:
		err = fmt.Errorf("unknown request %q", req.Op)
	}
	if err != nil {
		a.Error = err.Error()
	}
	return a
}

// stop closes the listeners and stops the server.
func (h *helper) stop() error {
	h.mu.Lock()
	for _, l := range h.listeners {
		_ = l.Close()
	}
	h.mu.Unlock()
	err := h.server.Stop()
	h.wg.Wait()
	return err
}
