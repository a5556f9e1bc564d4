package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleettest"
)

// churnPlacement tolerates Unreachable for a minute and names no other reason, as the demo's
// did: NotReady and Starting, which a restarting API server passes through, get the default.
const churnPlacement = `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Placement
metadata: {name: web}
spec:
  tolerations: [{reason: Unreachable, seconds: 60}]
  rolloutGroupSize: 1
`

// churnRelease delivers a ConfigMap, a Service and a Deployment that the members' own
// controllers roll out, one member after the other.
const churnRelease = `apiVersion: clusterregistry.k8s.io/v1alpha1
kind: Release
metadata: {name: web}
spec:
  placement: {name: web}
  rollout: {strategy: Groups, maxFailures: 1}
  source:
    manifests:
    - {apiVersion: v1, kind: ConfigMap, metadata: {name: web-config}, data: {color: blue}}
    - apiVersion: v1
      kind: Service
      metadata: {name: web}
      spec: {ports: [{port: 80}], selector: {app: web}}
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: web}
      spec:
        replicas: 2
        selector: {matchLabels: {app: web}}
        template:
          metadata: {labels: {app: web}}
          spec: {containers: [{name: web, image: registry.example/web:1}]}
`

// deliveredKinds are the kinds churnRelease delivers, as a member serves them.
var deliveredKinds = []schema.GroupVersionResource{
	{Version: "v1", Resource: "configmaps"}, {Version: "v1", Resource: "services"}, {Group: "apps", Version: "v1", Resource: "deployments"},
}

// Members restart and pause under the controllers as clusterregistry controllers runs them
// (health, placements, releases), with members whose own controllers run the workloads: an API
// server restarted (down 5 s), then an etcd paused for 20 s, then an API server restarted three
// times during a rollout, which completes in wave order. Each time the member comes back with
// every delivered object as it was: no delete seen by a watch on the member, the same uids, the
// Service's ClusterIP unchanged, and the Release Available again. The recovery times (the member
// Ready again, to the Release Available) are logged for docs/performance.md.
func TestDeliverySurvivesChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("needs kube-apiserver, etcd and the members' controllers; run without -short")
	}
	lf := localfleet.StartForTest(t, localfleet.Options{Members: 2, Workloads: &localfleet.Workloads{}})
	require.NoError(t, fleettest.InstallPlacementDecisionCRD(t.Context(), lf.Registry.Config))
	c := startChurn(t, lf)
	member := lf.Member("member-2")

	reasons := c.outage(t, "API server restarted", func() {
		require.NoError(t, member.StopAPIServer())
		time.Sleep(5 * time.Second)
		require.NoError(t, member.StartAPIServer())
	})
	require.Contains(t, reasons, v1alpha1.ReasonStarting, "a restarted API server was not said to be starting")
	c.outage(t, "etcd paused for 20 s", func() {
		require.NoError(t, member.PauseEtcd())
		time.Sleep(20 * time.Second)
		require.NoError(t, member.ResumeEtcd())
	})
	c.outage(t, "API server restarted three times during a rollout", func() {
		c.newRevision(t)
		for range 3 {
			require.NoError(t, member.StopAPIServer())
			time.Sleep(2 * time.Second)
			require.NoError(t, member.StartAPIServer())
			c.waitMemberReady(t, "a restart during the rollout")
		}
	})
	c.requireWaveOrder(t)
}

// newRevision changes the Release's ConfigMap: a new revision, rolled out member-1 first.
func (c *churn) newRevision(t *testing.T) {
	_, errOut, err := kubectl(t.Context(), c.lf, c.lf.Registry.Kubeconfig, "patch", "release", "web", "-n", c.lf.Namespace, "--type", "json",
		"-p", `[{"op": "replace", "path": "/spec/source/manifests/0/data/color", "value": "green"}]`)
	require.NoError(t, err, errOut)
}

// waitMemberReady waits until member-2's Cluster is Ready; it says when it saw it.
func (c *churn) waitMemberReady(t *testing.T, what string) time.Time {
	var at time.Time
	require.Eventually(t, func() bool {
		cl, err := versioned.NewForConfigOrDie(c.lf.Registry.Config).ClusterregistryV1alpha1().Clusters(c.lf.Namespace).Get(t.Context(), "member-2", metav1.GetOptions{})
		at = time.Now()
		return err == nil && cl.IsReady()
	}, 2*time.Minute, 100*time.Millisecond, "%s: member-2 never Ready again; logs:\n%s", what, c.logs.String())
	return at
}

// requireWaveOrder: the last revision reached member-1 (group 0) before member-2 (group 1),
// and member-2 runs it.
func (c *churn) requireWaveOrder(t *testing.T) {
	list, err := versioned.NewForConfigOrDie(c.lf.Registry.Config).ClusterregistryV1alpha1().ReleaseStatusSlices(c.lf.Namespace).List(t.Context(),
		metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=web"})
	require.NoError(t, err)
	applied := map[string]time.Time{}
	for _, s := range list.Items {
		for _, m := range s.Members {
			require.NotNil(t, m.LastApplied, "%s: never applied", m.Cluster)
			applied[m.Cluster] = m.LastApplied.Time
		}
	}
	require.False(t, applied["member-2"].Before(applied["member-1"]), "the second wave began before the first: %v", applied)
	cm, err := c.member.CoreV1().ConfigMaps("default").Get(t.Context(), "web-config", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "green", cm.Data["color"])
}

// churn is a fleet with the controllers running, a Release Available on it, and a watch of
// member-2's delivered objects.
type churn struct {
	lf       *localfleet.Fleet
	logs     *syncBuffer
	releases func() (*v1alpha1.Release, error)
	member   kubernetes.Interface
	dyn      *dynamic.DynamicClient
	deletes  *deleteCounter
	uids     map[string]types.UID
	ip       string
}

// startChurn runs the controllers, applies churnPlacement and churnRelease, waits until the
// Release is Available on both members, and starts watching member-2.
func startChurn(t *testing.T, lf *localfleet.Fleet) *churn {
	ctx, cancel := context.WithCancel(context.Background())
	logs := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", lf.Namespace, "controllers", "--controllers", "health,placements,releases",
			"--interval", "300ms", "--failure-threshold", "1", "--success-threshold", "1"}, logs, logs)
	}()
	t.Cleanup(func() { cancel(); requireStopped(t, done, logs) })
	dir := t.TempDir()
	for name, body := range map[string]string{"placement.yaml": churnPlacement, "release.yaml": churnRelease} {
		file := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(file, []byte(body), 0o600))
		require.NoError(t, kubectlApply(t, lf, file))
	}
	m := lf.Member("member-2")
	c := &churn{lf: lf, logs: logs, member: kubernetes.NewForConfigOrDie(m.Config), dyn: dynamic.NewForConfigOrDie(m.Config),
		releases: func() (*v1alpha1.Release, error) {
			return versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Releases(lf.Namespace).Get(context.Background(), "web", metav1.GetOptions{})
		}}
	c.waitAvailable(t, "the Release Available on both members")
	c.uids, c.ip = c.delivered(t)
	c.deletes = watchDeletes(t, c.dyn, v1alpha1.ReleaseLabel+"=web")
	return c
}

// kubectlApply applies file to the fleet's cluster set with the real kubectl.
func kubectlApply(t *testing.T, lf *localfleet.Fleet, file string) error {
	_, errOut, err := kubectl(t.Context(), lf, lf.Registry.Kubeconfig, "apply", "-n", lf.Namespace, "-f", file)
	if err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w: %s", file, err, errOut)
	}
	return nil
}

// outage does what happens to member-2, waits until it is Ready again and the Release Available,
// and requires every delivered object there as it was; it returns the Ready reasons member-2
// passed through.
func (c *churn) outage(t *testing.T, what string, happen func()) (reasons []string) {
	seen := c.follow(t)
	happen()
	readyAt := c.waitMemberReady(t, what)
	c.waitAvailable(t, what+": the Release Available again")
	t.Logf("%s: member Ready again -> Release Available in %s", what, time.Since(readyAt).Round(10*time.Millisecond))
	reasons, phases := seen()
	t.Logf("%s: member-2's Ready reasons %v; its phases in the Release %v", what, reasons, phases)
	require.Greater(t, len(reasons), 1, "%s: the health controller never saw member-2 not Ready: the test tested nothing", what)
	time.Sleep(2 * time.Second) // what a pass after the recovery would remove, it would have begun to
	uids, ip := c.delivered(t)
	require.Equal(t, c.uids, uids, "%s: member-2's delivered objects were made again", what)
	require.Equal(t, c.ip, ip, "%s: the Service's ClusterIP changed", what)
	require.Zero(t, c.deletes.count(), "%s: deletes seen on member-2: %v", what, c.deletes.seen())
	return reasons
}

// follow records, until the returned function is called, each new Ready reason of member-2's
// Cluster and each new phase of member-2 in the Release's status (every 100 ms).
func (c *churn) follow(t *testing.T) func() (reasons, phases []string) {
	registry := versioned.NewForConfigOrDie(c.lf.Registry.Config).ClusterregistryV1alpha1()
	var mu sync.Mutex
	var reasons, phases []string
	add := func(list *[]string, v string) {
		mu.Lock()
		defer mu.Unlock()
		if len(*list) == 0 || (*list)[len(*list)-1] != v {
			*list = append(*list, v)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ; ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
			if cl, err := registry.Clusters(c.lf.Namespace).Get(ctx, "member-2", metav1.GetOptions{}); err == nil {
				if cond := cl.Status.Condition(v1alpha1.ConditionReady); cond != nil {
					add(&reasons, cond.Reason)
				}
			}
			if r, err := c.releases(); err == nil {
				phase := string(v1alpha1.PhaseReady)
				for _, w := range r.Status.Worst {
					if w.Cluster == "member-2" {
						phase = string(w.Phase)
					}
				}
				add(&phases, phase)
			}
		}
	})
	return func() ([]string, []string) {
		cancel()
		wg.Wait()
		return reasons, phases
	}
}

// waitAvailable waits until the Release is Ready on both members and Available.
func (c *churn) waitAvailable(t *testing.T, what string) {
	var last *v1alpha1.Release
	require.Eventually(t, func() bool {
		r, err := c.releases()
		if err != nil {
			return false
		}
		last = r
		a := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseAvailable)
		p := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseProgressing)
		return r.Status.ObservedGeneration == r.Generation && r.Status.Ready == 2 && a != nil && a.Status == metav1.ConditionTrue &&
			p != nil && p.Reason == "Complete"
	}, 3*time.Minute, 200*time.Millisecond, "%s: never; last status %+v; logs:\n%s", what, statusOf(last), c.logs.String())
}

func statusOf(r *v1alpha1.Release) any {
	if r == nil {
		return nil
	}
	return r.Status
}

// delivered are the uids of the delivered objects on member-2, by kind and name, and the
// Service's ClusterIP.
func (c *churn) delivered(t *testing.T) (map[string]types.UID, string) {
	out := map[string]types.UID{}
	for _, gvr := range deliveredKinds {
		list, err := c.dyn.Resource(gvr).Namespace("default").List(t.Context(), metav1.ListOptions{LabelSelector: v1alpha1.ReleaseLabel + "=web"})
		require.NoError(t, err)
		for _, o := range list.Items {
			out[gvr.Resource+"/"+o.GetName()] = o.GetUID()
		}
	}
	require.Len(t, out, 3, "member-2 lacks delivered objects: %v", out)
	svc, err := c.member.CoreV1().Services("default").Get(t.Context(), "web", metav1.GetOptions{})
	require.NoError(t, err)
	return out, svc.Spec.ClusterIP
}

// deleteCounter counts the deletes a watch on the member saw.
type deleteCounter struct {
	mu      sync.Mutex
	deleted []string
}

func (d *deleteCounter) count() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.deleted) }

func (d *deleteCounter) seen() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.deleted...)
}

// watchDeletes watches each delivered kind on the member with selector, from now, through its
// restarts (a RetryWatcher resumes from the last resource version, so a delete made while the
// watch was down still arrives), until the test ends.
func watchDeletes(t *testing.T, dyn *dynamic.DynamicClient, selector string) *deleteCounter {
	d := &deleteCounter{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, gvr := range deliveredKinds {
		res := dyn.Resource(gvr).Namespace("default")
		list, err := res.List(t.Context(), metav1.ListOptions{LabelSelector: selector})
		require.NoError(t, err)
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.LabelSelector = selector
				return res.Watch(ctx, o)
			}})
		require.NoError(t, err)
		wg.Go(func() {
			defer w.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case ev, ok := <-w.ResultChan():
					if !ok {
						return
					}
					if ev.Type == watch.Deleted {
						m, _ := meta.Accessor(ev.Object)
						d.mu.Lock()
						d.deleted = append(d.deleted, gvr.Resource+"/"+m.GetName())
						d.mu.Unlock()
					}
				}
			}
		})
	}
	return d
}
