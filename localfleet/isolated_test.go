package localfleet_test

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/localfleet"
)

// An isolated member lives in a network of its own, as one behind NAT does: its Cluster's address
// refuses a dial from here, while the test still reaches it through Config (and so through its
// own Unix socket), programs run in its network with Command reach it at that address, the
// registry only once bridged, and its simulated Nodes run there too. It restarts and stops as
// any member does, leaving no process behind.
func TestAnIsolatedMember(t *testing.T) {
	ctx := testContext(t)
	f, err := localfleet.Start(ctx, localfleet.Options{Members: 1, Isolated: []string{"member-1"}, Workloads: &localfleet.Workloads{Nodes: 1}})
	require.NoError(t, err)
	stopped := false
	defer func() {
		if !stopped {
			_ = f.Stop()
		}
	}()
	m := f.Members[0]
	require.True(t, m.Isolated())
	require.False(t, f.Registry.Isolated())

	c, err := versioned.NewForConfigOrDie(f.Registry.Config).ClusterregistryV1alpha1().Clusters(f.Namespace).Get(ctx, "member-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, m.URL(), c.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress)
	require.Empty(t, c.Status.Conditions, "localfleet claimed an isolated member Ready")
	_, err = net.DialTimeout("tcp", strings.TrimPrefix(m.URL(), "https://"), 5*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "the isolated member's address answered a dial from outside its network")

	kube := kubernetes.NewForConfigOrDie(m.Config)
	nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, nodes.Items, 1)
	require.Eventually(t, func() bool {
		n, err := kube.CoreV1().Nodes().Get(ctx, "member-1-node-1", metav1.GetOptions{})
		return err == nil && len(n.Status.Conditions) > 0
	}, time.Minute, 100*time.Millisecond, "KWOK in the member's network kept no Node status")

	kubectl := func(kubeconfig string) (string, error) {
		out, err := m.Command(ctx, f.Kubectl, "--kubeconfig="+kubeconfig, "--request-timeout=10s", "get", "namespace", "default", "-o", "name").CombinedOutput()
		return string(out), err
	}
	out, err := kubectl(m.Kubeconfig)
	require.NoError(t, err, out)
	require.Equal(t, "namespace/default\n", out)
	out, err = kubectl(f.Registry.Kubeconfig)
	require.Error(t, err, "the registry was reachable from the member's network before it was bridged: %s", out)
	require.NoError(t, m.Bridge(strings.TrimPrefix(f.Registry.URL(), "https://")))
	out, err = kubectl(f.Registry.Kubeconfig)
	require.NoError(t, err, out)

	kubeconfig, err := m.AddUser("alice")
	require.NoError(t, err)
	require.Contains(t, string(kubeconfig), m.URL())
	require.NoError(t, m.StopAPIServer())
	_, err = kube.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.Error(t, err, "the API server still answered once stopped")
	require.NoError(t, m.StartAPIServer())
	_, err = kube.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{})
	require.NoError(t, err)

	pids := inOtherNetworks(t)
	require.GreaterOrEqual(t, len(pids), 6, "the helper, etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok")
	stopped = true
	require.NoError(t, f.Stop())
	_, err = os.Stat(m.Kubeconfig)
	require.True(t, errors.Is(err, os.ErrNotExist), "the member's files were left: %v", err)
	for _, pid := range pids {
		require.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "process %d still runs after Stop", pid)
	}
}

// inOtherNetworks are this process's descendants that live in another network namespace.
func inOtherNetworks(t *testing.T) []int {
	ours, err := os.Readlink("/proc/self/ns/net")
	require.NoError(t, err)
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && ns != ours && descends(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// descends reports whether process pid descends from this one.
func descends(pid int) bool {
	for pid > 1 {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return false
		}
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 {
			return false
		}
		pid, _ = strconv.Atoi(fields[1])
		if pid == os.Getpid() {
			return true
		}
	}
	return false
}
