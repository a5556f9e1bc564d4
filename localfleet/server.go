package localfleet

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

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

	env      *envtest.Environment
	dir      string
	stopOnce sync.Once
	stopErr  error
}

// startServer starts kube-apiserver and etcd from assets and writes an admin kubeconfig.
func startServer(assets string, timeout time.Duration) (*Server, error) {
	s := &Server{env: &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  timeout,
	}}
	var err error
	if s.Config, err = s.env.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	if err := s.writeKubeconfig(); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) writeKubeconfig() error {
	kubeconfig, err := s.AddUser("admin", "system:masters")
	if err != nil {
		return err
	}
	if s.dir, err = os.MkdirTemp("", "localfleet-"); err != nil {
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

// Stop stops the API server and etcd and removes their files. Calling it again does nothing.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.stopErr = s.env.Stop()
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
	})
	return s.stopErr
}
