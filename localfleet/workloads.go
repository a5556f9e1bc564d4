package localfleet

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Workloads makes members run workloads as a cluster does: kube-controller-manager (Deployments,
// ReplicaSets, StatefulSets, DaemonSets, Jobs, garbage collection, namespaces, node lifecycle,
// service accounts), kube-scheduler, and KWOK with simulated Nodes whose Pods run at once, so
// that a Deployment becomes Available through Kubernetes' own controllers, or never does for a
// bad image (UnpullableRegistry).
type Workloads struct {
	// Members names the members that run workloads (member-1, ...); every member when empty.
	Members []string
	// Nodes is how many simulated Nodes each such member has; 2 when zero. Node i of member m is
	// named m-node-i and labelled with the region and zone NodeLabels gives it.
	Nodes int
}

// UnpullableRegistry is the registry host of images that never run on a member with workloads:
// a Pod of one is scheduled, its containers wait in ImagePullBackOff, and it never turns Ready,
// as a Pod of a bad image does. (".invalid" is a reserved top-level domain: nothing pulls from it.)
const UnpullableRegistry = "unpullable.invalid"

// The labels of a member's simulated Nodes: the member's own region, and a zone per Node.
const (
	RegionLabel = "topology.kubernetes.io/region"
	ZoneLabel   = "topology.kubernetes.io/zone"
)

// kwokNodeAnnotation marks the Nodes KWOK manages, so that it leaves any other alone.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

//go:embed stages.yaml
var stages []byte

// The binaries a member with workloads runs, beside kube-apiserver in the assets directory.
var workloadBinaries = []string{"kube-controller-manager", "kube-scheduler", "kwok"}

// kcmControllers are the controllers kube-controller-manager runs on a member with workloads.
const kcmControllers = "deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller,job-controller," +
	"garbage-collector-controller,namespace-controller,node-lifecycle-controller,serviceaccount-controller,endpointslice-controller," +
	"clusterrole-aggregation-controller"

// workloadProcs are the processes that make a member run workloads.
type workloadProcs struct {
	cmds []*exec.Cmd
	done []chan error
	logs string
}

// startWorkloads starts the workload processes against s, logging to s's directory, and makes
// its Nodes; on failure it stops what it started.
func startWorkloads(ctx context.Context, assets string, s *Server, member string, nodes int) (*workloadProcs, error) {
	for _, bin := range workloadBinaries {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			return nil, fmt.Errorf("members with workloads need %s in %s; build it with %s: %w", bin, assets, buildCommand, err)
		}
	}
	dir := filepath.Join(s.dir, "workloads")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	stagesFile := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(stagesFile, stages, 0o600); err != nil {
		return nil, err
	}
	w := &workloadProcs{logs: dir}
	args := map[string][]string{
		"kube-controller-manager": {"--kubeconfig=" + s.Kubeconfig, "--controllers=" + kcmControllers, "--leader-elect=false",
			"--secure-port=0", "--use-service-account-credentials=false", "--node-monitor-grace-period=40s",
			"--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10"},
		"kube-scheduler": {"--kubeconfig=" + s.Kubeconfig, "--leader-elect=false", "--secure-port=0"},
		"kwok": {"--kubeconfig=" + s.Kubeconfig, "--config=" + stagesFile, "--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
			"--node-lease-duration-seconds=40", "--cidr=10.0.0.0/16", "--node-ip=10.1.0.1"},
	}
	for _, bin := range workloadBinaries {
		if err := w.start(filepath.Join(assets, bin), args[bin], filepath.Join(dir, bin+".log")); err != nil {
			return nil, errors.Join(err, w.stop())
		}
	}
	if err := makeNodes(ctx, s, member, nodes); err != nil {
		return nil, errors.Join(err, w.stop())
	}
	return w, nil
}

// start runs one process, its output to logFile.
func (w *workloadProcs) start(bin string, args []string, logFile string) error {
	log, err := os.Create(logFile)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return fmt.Errorf("starting %s: %w", filepath.Base(bin), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); _ = log.Close() }()
	w.cmds, w.done = append(w.cmds, cmd), append(w.done, done)
	return nil
}

// stop ends the processes: SIGTERM, then SIGKILL for one still there after 10 seconds.
func (w *workloadProcs) stop() error {
	if w == nil {
		return nil
	}
	for _, cmd := range w.cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Process.Signal(syscall.SIGCONT) // one PauseNodes froze hears SIGTERM once thawed
	}
	var errs []error
	for i, cmd := range w.cmds {
		select {
		case <-w.done[i]:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-w.done[i]
			errs = append(errs, fmt.Errorf("%s did not stop within 10 seconds of SIGTERM; killed", filepath.Base(cmd.Path)))
		}
	}
	w.cmds, w.done = nil, nil
	return errors.Join(errs...)
}

// makeNodes registers the member's simulated Nodes, which KWOK then keeps Ready.
func makeNodes(ctx context.Context, s *Server, member string, n int) error {
	kube, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	for i := range n {
		name := fmt.Sprintf("%s-node-%d", member, i+1)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok",
				RegionLabel: member, ZoneLabel: fmt.Sprintf("%s-%c", member, 'a'+i%3)}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("registering Node %s: %w", name, err)
		}
	}
	return nil
}

// PauseNodes freezes the KWOK of a member with workloads (SIGSTOP), which keeps its simulated
// Nodes and runs their Pods: the Nodes' heartbeats and Leases lapse, as when a member's Nodes
// die or lose their network, so that the node lifecycle controller marks them NotReady (40 s
// after their last heartbeat) and their Pods not Ready, and Deployments there lose their
// availability. The API server keeps serving. ResumeNodes brings the Nodes back.
func (s *Server) PauseNodes() error {
	if s.isolated != nil {
		return s.isolated.do("pause-nodes")
	}
	return s.signalKWOK(syscall.SIGSTOP)
}

// ResumeNodes thaws the KWOK that PauseNodes froze: its Nodes turn Ready again, and their Pods
// with them (stages.yaml's pod-ready-again, as a kubelet that is back reports them).
func (s *Server) ResumeNodes() error {
	if s.isolated != nil {
		return s.isolated.do("resume-nodes")
	}
	return s.signalKWOK(syscall.SIGCONT)
}

func (s *Server) signalKWOK(sig syscall.Signal) error {
	if s.workloads == nil {
		return errors.New("localfleet: this server runs no workloads (Options.Workloads)")
	}
	for _, cmd := range s.workloads.cmds {
		if filepath.Base(cmd.Path) == "kwok" {
			if err := cmd.Process.Signal(sig); err != nil {
				return fmt.Errorf("signalling kwok (pid %d): %w", cmd.Process.Pid, err)
			}
			return nil
		}
	}
	return errors.New("localfleet: kwok is not running")
}
