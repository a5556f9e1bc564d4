package localfleet

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// controlPlaneTimeout bounds starting or stopping one kube-apiserver and etcd. A pair starts in
// about 3 seconds alone, but fleets start several at once, and tests run beside other packages'
// tests under the race detector on small machines; envtest's 20-second default is too tight.
const controlPlaneTimeout = 2 * time.Minute

// Server is one running kube-apiserver with its own etcd.
type Server struct {
	// Config reaches the API server as an administrator (a member of system:masters).
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same administrator, for kubectl and
	// for tools that take --kubeconfig.
	Kubeconfig string
	// Version is the kube-apiserver's version (its gitVersion, such as v1.36.3), as it answered
	// /version when it started: tests compare what tools report with it.
	Version string

	env       *envtest.Environment
	isolated  *isolation // nil for a server in this process's network
	dir       string
	workloads *workloadProcs // nil for an API server alone
	stopOnce  sync.Once
	stopErr   error
}

// startServer starts kube-apiserver and etcd from assets and writes an admin kubeconfig. The API
// server listens on 127.0.0.1:port, or on a free port when port is 0; a port is given for an
// isolated server, which also advertises that address.
func startServer(assets string, timeout time.Duration, port int) (*Server, error) {
	dir, err := os.MkdirTemp("", "localfleet-")
	if err != nil {
		return nil, err
	}
	// The API server's certificates live in a directory of ours, not one envtest removes when the
	// API server stops, so that StartAPIServer brings it back with the same ones.
	certs := filepath.Join(dir, "apiserver")
	if err := os.Mkdir(certs, 0o700); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{dir: dir, env: &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  timeout,
	}}
	s.env.ControlPlane.APIServer = &envtest.APIServer{CertDir: certs}
	if port != 0 {
		s.env.ControlPlane.APIServer.SecureServing.Address = "127.0.0.1"
		s.env.ControlPlane.APIServer.SecureServing.Port = strconv.Itoa(port)
		// In a network namespace of its own (isolated.go) there is no default route to take an
		// address from: the server advertises the one it listens on.
		s.env.ControlPlane.APIServer.Configure().Set("advertise-address", "127.0.0.1")
	}
	if s.Config, err = s.env.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	if err := s.writeKubeconfig(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := s.AggregateClusterRoles(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		_ = s.Stop()
		return nil, err
	}
	version, err := kube.Discovery().ServerVersion()
	if err != nil {
		_ = s.Stop()
		return nil, fmt.Errorf("reading the API server's version: %w", err)
	}
	s.Version = version.GitVersion
	return s, nil
}

func (s *Server) writeKubeconfig() error {
	kubeconfig, err := s.AddUser("admin", "system:masters")
	if err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(s.dir, "kubeconfig")
	return os.WriteFile(s.Kubeconfig, kubeconfig, 0o600)
}

// URL is the API server's address, https://127.0.0.1:port, as a Cluster records it.
func (s *Server) URL() string { return strings.TrimSuffix(s.Config.Host, "/") }

// AddUser adds a user who authenticates with a client certificate and returns a kubeconfig for
// them, with the server's address and CA. Put them in system:masters to let them do anything.
func (s *Server) AddUser(name string, groups ...string) ([]byte, error) {
	if s.isolated != nil {
		a, err := s.isolated.call(isolatedRequest{Op: "adduser", Name: name, Groups: groups})
		return a.Data, err
	}
	user, err := s.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("writing a kubeconfig for user %s: %w", name, err)
	}
	return kubeconfig, nil
}

// StopAPIServer kills the kube-apiserver alone, as a crash or an outage would: open connections
// break, new ones are refused, and etcd keeps every object. StartAPIServer brings it back. (A
// graceful stop would wait up to a minute for open watches to drain.)
func (s *Server) StopAPIServer() error {
	if s.isolated != nil {
		return s.isolated.do("stop-apiserver")
	}
	pid, err := s.apiServerPID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
	}
	// envtest waits for its process and notices it gone; Stop then has nothing to stop.
	return s.env.ControlPlane.APIServer.Stop()
}

// Reinstall replaces the cluster behind the server with a new, empty one, as a cluster torn down
// and installed again at the same address would be: the same address, certificates and users,
// but new etcd data, so a new kube-system namespace (another cluster ID) and none of the old
// objects. Service account tokens of the old cluster no longer work; client certificates do.
func (s *Server) Reinstall() error {
	if s.isolated != nil {
		return s.isolated.do("reinstall")
	}
	if err := s.StopAPIServer(); err != nil {
		return err
	}
	etcd := s.env.ControlPlane.Etcd
	if err := etcd.Stop(); err != nil { // removes its data
		return fmt.Errorf("stopping etcd: %w", err)
	}
	if err := etcd.Start(); err != nil {
		return fmt.Errorf("starting a new etcd: %w", err)
	}
	if err := s.StartAPIServer(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), controlPlaneTimeout)
	defer cancel()
	return s.AggregateClusterRoles(ctx)
}

// PauseEtcd freezes the server's etcd (SIGSTOP), as a storage outage would: the API server stays
// up but its readiness check for etcd fails, and requests that need storage hang. ResumeEtcd
// thaws it.
func (s *Server) PauseEtcd() error {
	if s.isolated != nil {
		return s.isolated.do("pause-etcd")
	}
	return s.signalEtcd(syscall.SIGSTOP)
}

// ResumeEtcd thaws the etcd that PauseEtcd froze.
func (s *Server) ResumeEtcd() error {
	if s.isolated != nil {
		return s.isolated.do("resume-etcd")
	}
	return s.signalEtcd(syscall.SIGCONT)
}

func (s *Server) signalEtcd(sig syscall.Signal) error {
	pid, err := childPID("etcd", "--listen-client-urls="+s.env.ControlPlane.Etcd.URL.String())
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signalling etcd (pid %d): %w", pid, err)
	}
	return nil
}

// apiServerPID finds this Server's kube-apiserver among this process's children by its port.
func (s *Server) apiServerPID() (int, error) {
	u, err := url.Parse(s.Config.Host)
	if err != nil {
		return 0, err
	}
	return childPID("kube-apiserver", "--secure-port="+u.Port())
}

// childPID finds a child process of this one by its program's name and one of its arguments.
func childPID(program, arg string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, fmt.Errorf("finding %s: %w", program, err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == program && slices.Contains(args, arg) && parentPID(pid) == os.Getpid() {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("finding %s: no child process with %s", program, arg)
}

// parentPID is the parent of process pid, from /proc/pid/stat, or 0.
func parentPID(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces, so start after its closing parenthesis.
	i := strings.LastIndexByte(string(stat), ')')
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// StartAPIServer starts the kube-apiserver that StopAPIServer stopped, on the same address, with
// the same certificates and users, over the same etcd: to its clients, the server restarted.
func (s *Server) StartAPIServer() error {
	if s.isolated != nil {
		return s.isolated.do("start-apiserver")
	}
	if err := s.env.ControlPlane.APIServer.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	return nil
}

// Stop stops the API server and etcd and removes their files. Calling it again does nothing.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		if s.isolated != nil {
			s.stopErr = s.isolated.stop()
			return
		}
		s.stopErr = errors.Join(s.workloads.stop(), s.env.Stop())
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
	})
	return s.stopErr
}
