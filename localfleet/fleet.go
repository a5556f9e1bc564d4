package localfleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry"
)

// Options shape a local fleet.
type Options struct {
	// Members is how many member API servers to start and register, named member-1, member-2...
	// Zero starts the registry alone.
	Members int
	// Namespace holds the members' Clusters and credential Secrets in the registry; it is created.
	// Default "fleet".
	Namespace string
	// Labels go on every member's Cluster. Default fleet=local.
	Labels map[string]string
	// BinaryAssetsDirectory holds kube-apiserver, etcd and kubectl; see AssetsDir for the default.
	BinaryAssetsDirectory string
	// StartTimeout bounds starting (and stopping) each API server and its etcd. Default 2 minutes.
	StartTimeout time.Duration
	// Bare starts the registry as a plain API server, without the Cluster CRD or the namespace,
	// for tests of what installs them. It takes no members.
	Bare bool
	// MarkStopped makes Member.Stop record the outage in the member's Cluster (Ready False,
	// reason Unreachable), as a health controller would once it noticed, for tests that run
	// none. By default status is left to a controller: run health.New against the fleet.
	MarkStopped bool
	// Workloads, if set, makes members run workloads: kube-controller-manager, kube-scheduler and
	// KWOK's simulated Nodes (see Workloads). Without it a member is an API server alone, and a
	// Deployment there never gets a Pod.
	Workloads *Workloads
	// Isolated names members (member-1, ...) that live in a network namespace of their own, as
	// members behind NAT do: nothing on this machine's network can dial their API servers, so a
	// tool reaches them through a tunnel (package tunnel) or not at all. Such a member is
	// registered as the others are, its Cluster's address one that only its own network reaches,
	// but with no status: whatever probes it from outside finds it unreachable. Server.Command
	// runs a program in its network (its tunnel agent, or a join run at the edge),
	// Server.Bridge lets those programs reach an address outside, and Server.Config reaches the
	// API server through a Unix socket, for the test's own checks. It needs Linux, and root or
	// unprivileged user namespaces; Server.Command needs nsenter (util-linux).
	Isolated []string
}

// Fleet is a running registry and its members.
type Fleet struct {
	// Registry serves the Cluster API and holds the members' Clusters and credential Secrets.
	Registry *Server
	// Namespace is where the members are registered.
	Namespace string
	// Members are the member clusters, in the order of their names.
	Members []*Member
	// Kubectl is the kubectl binary beside the servers, or "" when there is none.
	Kubectl string

	stopOnce sync.Once
	stopErr  error
	stopped  chan struct{}

	markStopped bool
}

// Start starts the registry and opts.Members members at once, installs the Cluster CRD in the
// registry, and registers every member, its Ready condition True. If anything fails, whatever
// was started is stopped again. Call Stop when done, on every path: the servers are processes
// that outlive the caller otherwise.
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.Members < 0 {
		return nil, fmt.Errorf("localfleet: Members is %d, want zero or more", opts.Members)
	}
	if opts.Bare && opts.Members > 0 {
		return nil, fmt.Errorf("localfleet: Bare with Members %d: members are registered as Clusters, which need the CRD", opts.Members)
	}
	if opts.Namespace == "" {
		opts.Namespace = "fleet"
	}
	if opts.Labels == nil {
		opts.Labels = map[string]string{"fleet": "local"}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = controlPlaneTimeout
	}
	assets, err := AssetsDir(opts.BinaryAssetsDirectory)
	if err != nil {
		return nil, err
	}

	isolated, err := isolatedIndexes(opts)
	if err != nil {
		return nil, err
	}
	servers, err := startServers(assets, 1+opts.Members, opts.StartTimeout, isolated)
	if err != nil {
		return nil, err
	}
	f := &Fleet{Registry: servers[0], Namespace: opts.Namespace, markStopped: opts.MarkStopped, stopped: make(chan struct{})}
	if _, err := os.Stat(filepath.Join(assets, "kubectl")); err == nil {
		f.Kubectl = filepath.Join(assets, "kubectl")
	}
	for i, s := range servers[1:] {
		f.Members = append(f.Members, &Member{Server: s, Name: fmt.Sprintf("member-%d", i+1), fleet: f})
	}
	if opts.Bare {
		return f, nil
	}
	if err := f.setUp(ctx, opts.Labels); err != nil {
		return nil, errors.Join(err, f.Stop())
	}
	if opts.Workloads != nil {
		if err := f.startWorkloads(ctx, assets, *opts.Workloads); err != nil {
			return nil, errors.Join(err, f.Stop())
		}
	}
	return f, nil
}

// startWorkloads makes the members w names (every one when it names none) run workloads.
func (f *Fleet) startWorkloads(ctx context.Context, assets string, w Workloads) error {
	if w.Nodes <= 0 {
		w.Nodes = 2
	}
	names := w.Members
	if len(names) == 0 {
		for _, m := range f.Members {
			names = append(names, m.Name)
		}
	}
	for _, name := range names {
		m := f.Member(name)
		if m == nil {
			return fmt.Errorf("localfleet: Workloads.Members names %s, which is not a member", name)
		}
		if m.isolated != nil {
			if _, err := m.isolated.call(isolatedRequest{Op: "workloads", Member: name, Nodes: w.Nodes}); err != nil {
				return fmt.Errorf("localfleet: %s: %w", name, err)
			}
			continue
		}
		procs, err := startWorkloads(ctx, assets, m.Server, name, w.Nodes)
		if err != nil {
			return fmt.Errorf("localfleet: %s: %w", name, err)
		}
		m.Server.workloads = procs
	}
	return nil
}

// isolatedIndexes are the indexes, among the servers Start starts (the registry first), of the
// members opts.Isolated names.
func isolatedIndexes(opts Options) (map[int]bool, error) {
	indexes := map[int]bool{}
	for _, name := range opts.Isolated {
		var i int
		if _, err := fmt.Sscanf(name, "member-%d", &i); err != nil || i < 1 || i > opts.Members || fmt.Sprintf("member-%d", i) != name {
			return nil, fmt.Errorf("localfleet: Isolated names %q, which is not one of the %d members (member-1, ...)", name, opts.Members)
		}
		indexes[i] = true
	}
	return indexes, nil
}

// startServers starts n servers in parallel, those at the isolated indexes in network namespaces
// of their own; on any failure it stops those that started.
func startServers(assets string, n int, timeout time.Duration, isolated map[int]bool) ([]*Server, error) {
	servers := make([]*Server, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() {
			if isolated[i] {
				servers[i], errs[i] = startIsolatedServer(assets, timeout)
				return
			}
			servers[i], errs[i] = startServer(assets, timeout, 0)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, s := range servers {
			if s != nil {
				_ = s.Stop()
			}
		}
		return nil, err
	}
	return servers, nil
}

func (f *Fleet) setUp(ctx context.Context, labels map[string]string) error {
	crds, err := apiextensionsclient.NewForConfig(f.Registry.Config)
	if err != nil {
		return err
	}
	if _, err := clusterregistry.Install(ctx, crds); err != nil {
		return fmt.Errorf("installing the registry's CRDs: %w", err)
	}
	kube, err := kubernetes.NewForConfig(f.Registry.Config)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.Namespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s in the registry: %w", f.Namespace, err)
	}
	registry, err := versioned.NewForConfig(f.Registry.Config)
	if err != nil {
		return err
	}
	errs := make([]error, len(f.Members))
	var wg sync.WaitGroup
	for i, m := range f.Members {
		wg.Go(func() { errs[i] = m.register(ctx, kube, registry, i, labels) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Member returns the member of that name, or nil.
func (f *Fleet) Member(name string) *Member {
	for _, m := range f.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Stop stops every member and the registry and removes their files. Calling it again does
// nothing.
func (f *Fleet) Stop() error {
	f.stopOnce.Do(func() {
		close(f.stopped) // members stopped from here on leave their Clusters alone
		servers := []*Server{f.Registry}
		for _, m := range f.Members {
			servers = append(servers, m.Server)
		}
		errs := make([]error, len(servers))
		var wg sync.WaitGroup
		for i, s := range servers {
			wg.Go(func() { errs[i] = s.Stop() })
		}
		wg.Wait()
		f.stopErr = errors.Join(errs...)
	})
	return f.stopErr
}
