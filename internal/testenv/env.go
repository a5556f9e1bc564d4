package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cluster-registry/sdk/clusterregistry"
)

// installTimeout bounds the CRD install; an Established CRD takes well under a second here.
const installTimeout = 30 * time.Second

// controlPlaneTimeout bounds starting or stopping kube-apiserver and etcd. One pair starts in
// about 3 seconds, but tests start several at once on 2 cores under the race detector, beside
// other packages' tests; envtest's 20-second default has too little room for that.
const controlPlaneTimeout = 2 * time.Minute

// Env is a running kube-apiserver and etcd with the Cluster CRD installed.
type Env struct {
	// Config reaches the API server as a member of system:masters.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig file for the same user, for kubectl.
	Kubeconfig string
	// Kubectl is the path of the kubectl binary built beside the server.
	Kubectl string

	env *envtest.Environment
	dir string
}

// Start starts a new API server and etcd and installs the Cluster CRD. Call Stop when done.
func Start() (*Env, error) {
	// envtest and client-go log through controller-runtime's logger; without one set it complains
	// on every use.
	logf.SetLogger(logr.Discard())

	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	e := &Env{
		env: &envtest.Environment{
			BinaryAssetsDirectory:    assets,
			ControlPlaneStartTimeout: controlPlaneTimeout,
			ControlPlaneStopTimeout:  controlPlaneTimeout,
		},
		Kubectl: filepath.Join(assets, "kubectl"),
	}
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	if err := e.setUp(); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) setUp() error {
	ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
	defer cancel()
	crdClient, err := apiextensionsclient.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	if err := clusterregistry.Install(ctx, crdClient); err != nil {
		return err
	}

	user, err := e.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("adding an admin user: %w", err)
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return fmt.Errorf("writing the admin kubeconfig: %w", err)
	}
	if e.dir, err = os.MkdirTemp("", "clusterregistry-testenv-"); err != nil {
		return err
	}
	e.Kubeconfig = filepath.Join(e.dir, "kubeconfig")
	return os.WriteFile(e.Kubeconfig, kubeconfig, 0o600)
}

// Stop stops the API server and etcd and removes their files.
func (e *Env) Stop() error {
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
	return e.env.Stop()
}

// AddUser adds a user who authenticates with a client certificate, and returns a kubeconfig for
// them. Put them in system:masters to let them do anything.
func (e *Env) AddUser(name string, groups ...string) ([]byte, error) {
	user, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding user %s: %w", name, err)
	}
	return user.KubeConfig()
}
