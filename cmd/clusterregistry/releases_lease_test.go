package main

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// Two releases controllers of one cluster set, processes of their own started with different
// flags (one as the chart runs it: every set, elected in clusterregistry-system; one by hand for
// the set alone), never both act on the set: they meet on the Lease clusterregistry-releases in
// the set's own namespace, one leads, and the other takes over when it stops. Both had logged
// "leading", each on a Lease of its own namespace. A registry of the test's own: a controller of
// every set acts on every set it finds Releases in.
func TestReleasesControllersOfOneSetMeetOnItsLease(t *testing.T) {
	realservers.Required(t)
	lf := localfleet.StartForTest(t, localfleet.Options{})
	ctx := t.Context()
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(ctx, lf.Registry.Config))
	kube := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusterregistry-system"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	set := lf.Namespace
	_, err = versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Releases(set).Create(ctx, &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: set},
		Spec:       v1alpha1.ReleaseSpec{Source: v1alpha1.ReleaseSource{ConfigMap: &v1alpha1.ReleaseConfigMapSource{Name: "web"}}, Placement: v1alpha1.ReleasePlacement{Name: "web"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	bin := commandBinary(t)
	// leads is the releases Lease a process says it leads ("" for none): before, each took one
	// in a namespace of its own flags, and both acted on the set.
	leads := func(p *releasesProc) string {
		for _, line := range strings.Split(p.logs.String(), "\n") {
			if _, lease, ok := strings.Cut(line, `"leading" "lease"="`); ok && strings.Contains(lease, "/clusterregistry-releases\"") {
				return lease[:strings.Index(lease, `"`)]
			}
		}
		return ""
	}
	leadsSet := func(p *releasesProc) bool { return leads(p) != "" }
	chart := startReleasesProc(t, bin, "--kubeconfig", lf.Registry.Kubeconfig, "controllers", "-A", "--controllers", "releases",
		"--leader-elect", "--leader-elect-namespace", "clusterregistry-system")
	byHand := startReleasesProc(t, bin, "--kubeconfig", lf.Registry.Kubeconfig, "-n", set, "controllers", "--controllers", "releases")
	logs := func() string { return "--- -A:\n" + chart.logs.String() + "--- -n:\n" + byHand.logs.String() }
	require.Eventually(t, func() bool { return leadsSet(chart) || leadsSet(byHand) }, 60*time.Second, 100*time.Millisecond,
		"neither leads the set; logs:\n%s", logs())
	leader, other := chart, byHand
	if leadsSet(byHand) {
		leader, other = byHand, chart
	}
	// The other waits: it holds the Lease's turn through several of its retries.
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		require.False(t, leadsSet(other), "both controllers lead set %s; logs:\n%s", set, logs())
	}
	require.Equal(t, set+"/clusterregistry-releases", leads(leader), "the Lease is the set's own")
	l, err := kube.CoordinationV1().Leases(set).Get(ctx, "clusterregistry-releases", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, l.Spec.HolderIdentity)

	// The leader stops as a rolling update stops it: the other leads the set.
	require.NoError(t, leader.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, leader.cmd.Wait(), "exit status after SIGTERM; logs:\n%s", logs())
	require.Eventually(t, func() bool { return leadsSet(other) }, 30*time.Second, 100*time.Millisecond,
		"the other controller did not take the set over; logs:\n%s", logs())
}

// releasesProc is a `clusterregistry controllers` process of the test's.
type releasesProc struct {
	cmd  *exec.Cmd
	logs syncBuffer
}

func startReleasesProc(t *testing.T, bin string, args ...string) *releasesProc {
	t.Helper()
	p := &releasesProc{}
	p.cmd = exec.CommandContext(context.Background(), bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	return p
}
