package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/shard"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// Three replicas of `controllers --shard-group`, each a process of its own, divide 12 members
// (Clusters of the two real members; half labelled with their shard bucket, half in none), each
// watching only the Clusters it owns. One is killed (SIGKILL: no goodbye, its Lease stands until
// it expires): every member it owned is probed again by the others within 30 s. Another stops as a
// rolling update stops it (SIGTERM): its members are probed again within 10 s.
func TestControllersShardedFailover(t *testing.T) {
	lf := sharedFleet(t)
	bin := commandBinary(t)
	ns := fleettest.CopySet(t, lf)
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(ns)
	var names []string
	for i := range 12 {
		c, err := clusters.Get(t.Context(), fmt.Sprintf("member-%d", i%2+1), metav1.GetOptions{})
		require.NoError(t, err)
		c.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("m-%02d", i)}
		if i%2 == 0 {
			shard.SetBucket(c) // as join would; the others are in no bucket, owned by name
		}
		_, err = clusters.Create(t.Context(), c, metav1.CreateOptions{})
		require.NoError(t, err)
		names = append(names, c.Name)
	}
	require.NoError(t, clusters.Delete(t.Context(), "member-1", metav1.DeleteOptions{}))
	require.NoError(t, clusters.Delete(t.Context(), "member-2", metav1.DeleteOptions{}))

	// Every probe writes (a 1 s heartbeat), so that lastProbeTime says when a member was probed.
	replicas := startProbers(t, bin, lf, ns, 3)
	logs := func() string { return probersLogs(replicas) }
	probed := func(keys []string, since time.Time, within time.Duration) time.Duration {
		t.Helper()
		return probedAfter(t, clusters, keys, since, within, logs)
	}
	probed(names, time.Now(), 60*time.Second)

	// owned is what replica r owns among the live ones, as every replica computes it: each
	// watches only its buckets' Clusters and those in no bucket (no placements or releases).
	leases := kubernetes.NewForConfigOrDie(lf.Registry.Config).CoordinationV1().Leases(ns)
	owned := func(r *prober, live ...*prober) []string { return ownedBy(t, clusters, names, r, live...) }
	list, err := leases.List(t.Context(), metav1.ListOptions{LabelSelector: shard.GroupLabel + "=probers"})
	require.NoError(t, err)
	require.Len(t, list.Items, 3, "one Lease per replica")

	// SIGKILL: the members of the killed replica wait for its Lease to expire (10 s), then move.
	replicas = ownersFirst(replicas, owned)
	killed := replicas[0]
	orphans := owned(killed, replicas...)
	require.NotEmpty(t, orphans, "the test needs the killed replica to own members")
	require.NoError(t, killed.cmd.Process.Kill())
	killedAt := time.Now()
	took := probed(orphans, killedAt, 30*time.Second)
	t.Logf("SIGKILL: the %d members of the killed replica were probed again after %s", len(orphans), took.Round(100*time.Millisecond))

	// SIGTERM, as a rolling update stops a pod: the replica deletes its Lease on the way out, and
	// its members move at the survivor's next look.
	stopped := replicas[1]
	orphans = owned(stopped, replicas[1:]...)
	require.NotEmpty(t, orphans, "the test needs the stopped replica to own members")
	require.NoError(t, stopped.cmd.Process.Signal(syscall.SIGTERM))
	stoppedAt := time.Now()
	require.NoError(t, stopped.cmd.Wait(), "exit status after SIGTERM; logs:\n%s", logs())
	took = probed(orphans, stoppedAt, 10*time.Second)
	t.Logf("SIGTERM: the %d members of the stopped replica were probed again after %s", len(orphans), took.Round(100*time.Millisecond))
	// The handoffs are in the survivor's log, not only in its metrics.
	require.Eventually(t, func() bool { return strings.Contains(replicas[2].logs.String(), "took members from the group") },
		10*time.Second, 100*time.Millisecond, "the survivor did not log the members it took; logs:\n%s", logs())
	list, err = leases.List(t.Context(), metav1.ListOptions{LabelSelector: shard.GroupLabel + "=probers"})
	require.NoError(t, err)
	holders := []string{}
	for _, l := range list.Items {
		holders = append(holders, *l.Spec.HolderIdentity)
	}
	require.NotContains(t, holders, stopped.id, "a replica stopped by SIGTERM left its Lease")
	// The survivor owns every member.
	require.Len(t, owned(replicas[2], replicas[2]), len(names))
}

// ownersFirst orders the three replicas so that the first owns members among all three, and the
// second among the last two: twelve members hashed among three random identities leave one
// owning none about once in a hundred runs, which failed the test on a loaded CI run.
func ownersFirst(replicas []*prober, owned func(*prober, ...*prober) []string) []*prober {
	for i := range replicas {
		for j := range replicas {
			k := 3 - i - j
			if i == j || k < 0 || k == i || k == j {
				continue
			}
			if len(owned(replicas[i], replicas...)) > 0 && len(owned(replicas[j], replicas[j], replicas[k])) > 0 {
				return []*prober{replicas[i], replicas[j], replicas[k]}
			}
		}
	}
	return replicas
}

// prober is a replica of the failover test's shard group, a process of its own.
type prober struct {
	cmd  *exec.Cmd
	logs syncBuffer
	id   string
}

// startProbers starts n replicas of a shard group of health controllers over ns, each probe a
// write (a 1 s heartbeat, so that lastProbeTime says when a member was probed), and returns once
// each has said who it is.
func startProbers(t *testing.T, bin string, lf *localfleet.Fleet, ns string, n int) []*prober {
	t.Helper()
	replicas := make([]*prober, n)
	for i := range replicas {
		r := &prober{}
		r.cmd = exec.CommandContext(t.Context(), bin, "--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "controllers", "--controllers", "health",
			"--shard-group", "probers", "--interval", "300ms", "--heartbeat", "1s", "--failure-threshold", "1", "--success-threshold", "1")
		r.cmd.Stdout, r.cmd.Stderr = &r.logs, &r.logs
		require.NoError(t, r.cmd.Start())
		replicas[i] = r
		t.Cleanup(func() {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		})
	}
	identity := regexp.MustCompile(`"shardGroup"="` + regexp.QuoteMeta(ns) + `/probers as ([^"]+)"`)
	for _, r := range replicas {
		for deadline := time.Now().Add(60 * time.Second); r.id == ""; time.Sleep(50 * time.Millisecond) {
			if m := identity.FindStringSubmatch(r.logs.String()); m != nil {
				r.id = m[1]
			}
			require.True(t, time.Now().Before(deadline), "a replica did not say who it is; logs:\n%s", probersLogs(replicas))
		}
	}
	return replicas
}

// probersLogs are every replica's logs, each headed with its number.
func probersLogs(replicas []*prober) string {
	var all string
	for i, r := range replicas {
		all += fmt.Sprintf("--- replica %d:\n%s", i, r.logs.String())
	}
	return all
}

// probedAfter waits until every member of keys is probed after since, and says how long that took.
func probedAfter(t *testing.T, clusters crv1alpha1.ClusterInterface, keys []string, since time.Time, within time.Duration, logs func() string) time.Duration {
	t.Helper()
	for deadline := since.Add(within); ; time.Sleep(100 * time.Millisecond) {
		var late []string
		for _, name := range keys {
			c, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
			require.NoError(t, err)
			if c.Status.LastProbeTime == nil || !c.Status.LastProbeTime.After(since) {
				late = append(late, name)
			}
		}
		if len(late) == 0 {
			return time.Since(since)
		}
		require.True(t, time.Now().Before(deadline), "%v not probed within %s; logs:\n%s", late, within, logs())
	}
}

// ownedBy is what replica r owns of names among the live ones, as every replica computes it.
func ownedBy(t *testing.T, clusters crv1alpha1.ClusterInterface, names []string, r *prober, live ...*prober) []string {
	var peers []shard.Peer
	for _, l := range live {
		peers = append(peers, shard.Peer{ID: l.id, Weight: 1})
	}
	var mine []string
	for _, name := range names {
		c, err := clusters.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		if shard.ClusterOwner(c, peers) == r.id {
			mine = append(mine, name)
		}
	}
	return mine
}
