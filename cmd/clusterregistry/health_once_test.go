package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// health --once probes each member once, writes what it found (one pass has no history: thresholds
// of 1), prints a line per member, and exits 0 when every status was written, a member that is
// down included: that is a finding, not a failure. A second pass finds nothing to write.
func TestHealthOnce(t *testing.T) {
	lf := sharedFleet(t)
	ctx := t.Context()
	ns := fleettest.CopySet(t, lf, "member-1")
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	gone, err := clusters.Get(ctx, "member-1", metav1.GetOptions{})
	require.NoError(t, err)
	gone.ObjectMeta = metav1.ObjectMeta{Name: "gone", Namespace: ns}
	gone.Spec.KubernetesAPIEndpoints.ServerEndpoints[0].ServerAddress = "https://127.0.0.1:1"
	_, err = clusters.Create(ctx, gone, metav1.CreateOptions{})
	require.NoError(t, err)

	cli := commandLine(ctx, lf.Registry.Kubeconfig, ns)
	code, out, stderr := cli("health", "--once")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Regexp(t, `(?m)^CLUSTER\s+READY\s+REASON\s+STATUS\s+MESSAGE$`, out)
	// Its Cluster points elsewhere than its Secret is pinned to: refused, and reported.
	require.Regexp(t, `(?m)^`+ns+`/gone\s+False\s+CredentialsUnavailable\s+written\s+.*pins its credentials to`, out)
	require.Regexp(t, `(?m)^`+ns+`/member-1\s+True\s+Reachable\s+written\s+`, out)
	for name, want := range map[string]string{"member-1": v1alpha1.ReasonReachable, "gone": v1alpha1.ReasonCredentialsUnavailable} {
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, want, c.Status.Condition(v1alpha1.ConditionReady).Reason, name)
	}

	code, out, stderr = cli("health", "--once")
	require.Equal(t, 0, code, "%s%s", out, stderr)
	require.Regexp(t, `(?m)^`+ns+`/member-1\s+True\s+Reachable\s+unchanged\s+`, out)

	code, _, stderr = cli("health", "--once", "--leader-elect")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "--once and --leader-elect conflict")
}

// Every line health logs has one format, client-go's included: leader election logs through klog,
// which before wrote its own "I1126 00:18:37.816718 ..." lines, straight to the process's stderr,
// among logr's.
func TestHealthLogsOneFormat(t *testing.T) {
	lf := sharedFleet(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	ctx, cancel := context.WithCancel(t.Context())
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "health", "--leader-elect", "--interval", "200ms"}, &logs, &logs)
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), "Successfully acquired lease"); time.Sleep(50 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "no lease acquired; logs:\n%s", logs.String())
	}
	cancel()
	require.Equal(t, 0, <-done, logs.String())
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		require.Regexp(t, `^"ts"="\d{4}-\d\d-\d\d [\d:.]+" ("level"=\d+ )?"msg"=`, line)
	}
}
