package scheduler_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	crv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/scheduler"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// BenchmarkScheduler: 10,000 Ready Clusters (100 label groups, 5 regions) and 1,000 Placements
// (each the 5 members of one group, spread across regions: 100 candidates each, and each Cluster
// a candidate of 10 placements) on a real registry, decided by the Controller that
// `clusterregistry controllers --controllers placements` runs. Run it once (-benchtime 1x).
// Reported:
//   - first-decisions-s: from Run until every Placement's decision is written (target < 30 s),
//     and first-status-s, until every Placement's status reports it;
//   - change-p99-ms: a chosen member turns Unreachable; time until every placement that chose
//     it has written a decision without it, over 20 such changes (target < 2,000 ms);
//   - writes-per-change: slices written per change, and unaffected-writes: writes beyond the
//     placements that chose the member (target 0);
//   - join-writes: writes after a Cluster that no placement selects joins (target 0);
//   - with fit and prefer, move-slice-writes and move-status-writes: slices and Placement
//     statuses written after a cpu more is asked of 200 chosen members (their scores fall, they
//     still fit; target 0 and 0: status.scores are those the members were chosen by).
func BenchmarkScheduler(b *testing.B) { benchScheduler(b, "scheduler-bench", false) }

// BenchmarkSchedulerFitAndPrefer is BenchmarkScheduler with every Cluster's status.resources
// set and every Placement asking fit (2 cpu free) and prefer (two weighted scores on free
// resources and a label), the policies a capacity-aware fleet runs; its targets are the plain
// policy's.
func BenchmarkSchedulerFitAndPrefer(b *testing.B) { benchScheduler(b, "scheduler-bench-fit", true) }

func benchScheduler(b *testing.B, ns string, fit bool) {
	realservers.Required(b)
	const n, placements = 10000, 1000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fleet, keys := schedulerBenchSet(ctx, b, ns, n, placements, fit)
	bulk := fleettest.Unthrottled(lf.Registry.Config)
	clusters := versioned.NewForConfigOrDie(bulk).ClusterregistryV1alpha1().Clusters(ns)
	client := cpversioned.NewForConfigOrDie(bulk)
	var statusWrites atomic.Int64
	registry := versioned.NewForConfigOrDie(countPlacementStatusWrites(bulk, &statusWrites))

	for range b.N {
		ctrl, err := scheduler.NewController(fleet, registry, client, scheduler.ControllerOptions{Namespace: ns,
			Options: scheduler.Options{SchedulerName: "bench", Workers: 8, Fresh: func() bool { return fleet.Status().Fresh() }}})
		if err != nil {
			b.Fatal(err)
		}
		s := ctrl.Scheduler()
		start := time.Now()
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(runCtx) }()
		for s.Writes() < placements {
			if time.Since(start) > 5*time.Minute {
				b.Fatalf("%d of %d decisions written after 5 minutes", s.Writes(), placements)
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.ReportMetric(time.Since(start).Seconds(), "first-decisions-s")
		waitStatuses(ctx, b, registry, ns, placements, start)
		b.ReportMetric(time.Since(start).Seconds(), "first-status-s")
		time.Sleep(2 * time.Second) // nothing more should come

		benchChanges(ctx, b, s, client, clusters, ns, keys)

		if fit {
			slicesBefore, statusesBefore := s.Writes(), statusWrites.Load()
			benchCapacityMoves(ctx, b, clusters, client, ns, keys)
			time.Sleep(2 * time.Second)
			b.ReportMetric(float64(s.Writes()-slicesBefore), "move-slice-writes")
			b.ReportMetric(float64(statusWrites.Load()-statusesBefore), "move-status-writes")
		}

		// A Cluster no placement selects joins.
		before := s.Writes()
		if _, err := clusters.Create(ctx, &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Labels: map[string]string{"group": "none"}},
			Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://unrelated.example:6443"}}}}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		b.ReportMetric(float64(s.Writes()-before), "join-writes")
		stop()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
}

// schedulerBenchSet makes n Ready Clusters in 100 label groups and 5 regions, and placements
// Placements, each of 5 members of one group spread over the regions; it returns a started Fleet
// of them and the Placements' keys.
func schedulerBenchSet(ctx context.Context, b *testing.B, ns string, n, placements int, fit bool) (*multicluster.Fleet, []types.NamespacedName) {
	bulk := fleettest.Unthrottled(lf.Registry.Config)
	clusters := versioned.NewForConfigOrDie(bulk).ClusterregistryV1alpha1().Clusters(ns)
	items := make([]v1alpha1.Cluster, n)
	for i := range items {
		items[i] = v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("member-%05d", i),
			Labels: map[string]string{"group": fmt.Sprintf("g%03d", i%100), "region": fmt.Sprintf("r%d", i/100%5)}},
			Spec: v1alpha1.ClusterSpec{KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: fmt.Sprintf("https://member-%05d.example:6443", i)}}}}}
	}
	fleettest.CreateClusters(b, bulk, ns, items, func(ctx context.Context, created *v1alpha1.Cluster) error {
		if fit {
			created = created.DeepCopy()
			created.Status.Resources = benchResources(created.Name)
		}
		return setStatus(ctx, clusters, created, metav1.ConditionTrue, v1alpha1.ReasonReachable)
	})
	fleet := multicluster.NewFleet(versioned.NewForConfigOrDie(bulk), nil, multicluster.FleetOptions{Namespaces: []string{ns}})
	if err := fleet.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(fleet.Stop)
	registry := versioned.NewForConfigOrDie(bulk)
	keys := make([]types.NamespacedName, placements)
	for i := range keys {
		keys[i] = types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("p-%04d", i)}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range keys {
		g.Go(func() error {
			spec := v1alpha1.PlacementSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": fmt.Sprintf("g%03d", i%100)}},
				Count:    ptr.To[int32](5), Spread: &v1alpha1.PlacementSpread{Label: "region"},
				// Unreachable not tolerated (the default is 300 s): the change measured is a
				// member leaving its placements.
				Tolerations: []v1alpha1.PlacementToleration{{Reason: v1alpha1.ReasonUnreachable, Seconds: ptr.To[int64](0)}},
			}
			if fit {
				spec.Fit = &v1alpha1.PlacementFit{Total: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
				spec.Prefer = []v1alpha1.PlacementPreference{
					{Weight: 10, CEL: `cluster.resources.free["cpu"] / cluster.resources.allocatable["cpu"]`},
					{Weight: 1, CEL: `cluster.labels.?region.orValue("") == "r0" ? 1 : 0`},
				}
			}
			_, err := registry.ClusterregistryV1alpha1().Placements(ns).Create(gctx, &v1alpha1.Placement{ObjectMeta: metav1.ObjectMeta{Name: keys[i].Name}, Spec: spec}, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	return fleet, keys
}

// benchResources are a member's figures, varied by its name: 8 to 32 cpu allocatable, a part
// of it requested, so that most members fit 2 cpu and their scores differ.
func benchResources(name string) *v1alpha1.ClusterResources {
	h := 0
	for _, r := range name {
		h = h*31 + int(r)
	}
	allocatable := 8 + h%4*8
	requested := h % 7 * allocatable / 8
	cpu := func(n int) resource.Quantity { return *resource.NewQuantity(int64(n), resource.DecimalSI) }
	return &v1alpha1.ClusterResources{Nodes: 3, ReadyNodes: 3,
		Allocatable:      corev1.ResourceList{corev1.ResourceCPU: cpu(allocatable)},
		Requested:        corev1.ResourceList{corev1.ResourceCPU: cpu(requested)},
		LargestFree:      corev1.ResourceList{corev1.ResourceCPU: cpu((allocatable - requested) / 3)},
		LastObservedTime: metav1.Now()}
}

// waitStatuses waits, until 5 minutes after start, for every Placement of ns to report 5 chosen
// at its generation.
func waitStatuses(ctx context.Context, b *testing.B, registry versioned.Interface, ns string, placements int, start time.Time) {
	for {
		list, err := registry.ClusterregistryV1alpha1().Placements(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		reported := 0
		for _, p := range list.Items {
			if p.Status.ObservedGeneration == p.Generation && p.Status.Chosen == 5 {
				reported++
			}
		}
		if reported == placements {
			break
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d statuses written after 5 minutes", reported, placements)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// benchChanges turns a chosen member of 20 placements Unreachable, one after the other, and
// reports how long until every placement that chose it has let it go, and the writes each change
// made (those to placements that did not choose it included).
func benchChanges(ctx context.Context, b *testing.B, s *scheduler.Scheduler, client cpversioned.Interface, clusters crv1alpha1.ClusterInterface, ns string, keys []types.NamespacedName) {
	var latencies []time.Duration
	var writes, unaffected int64
	for k := range 20 {
		key := keys[k*50]
		d, err := decision.Read(ctx, client, ns, key.Name)
		if err != nil || len(d.Clusters) == 0 {
			b.Fatalf("decision %s: %v %v", key.Name, d, err)
		}
		victim := d.Clusters[0]
		var choosers []types.NamespacedName
		for j := k * 50 % 100; j < len(keys); j += 100 { // the placements of the same group
			od, err := decision.Read(ctx, client, ns, keys[j].Name)
			if err != nil {
				b.Fatal(err)
			}
			if slices.Contains(od.Clusters, victim) {
				choosers = append(choosers, keys[j])
			}
		}
		before := s.Writes()
		c, err := clusters.Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		changed := time.Now()
		if err := setStatus(ctx, clusters, c, metav1.ConditionFalse, v1alpha1.ReasonUnreachable); err != nil {
			b.Fatal(err)
		}
		for _, ck := range choosers {
			for {
				od, err := decision.Read(ctx, client, ns, ck.Name)
				if err == nil && !slices.Contains(od.Clusters, victim) {
					break
				}
				if time.Since(changed) > time.Minute {
					b.Fatalf("placement %s still chooses %s a minute after it turned Unreachable", ck.Name, victim)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		latencies = append(latencies, time.Since(changed))
		time.Sleep(500 * time.Millisecond) // what else would be written
		delta := s.Writes() - before
		writes += delta
		unaffected += delta - int64(len(choosers))
	}
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Milliseconds()), "change-p99-ms")
	b.ReportMetric(float64(writes)/20, "writes-per-change")
	b.ReportMetric(float64(unaffected), "unaffected-writes")
}

func setStatus(ctx context.Context, clusters interface {
	UpdateStatus(context.Context, *v1alpha1.Cluster, metav1.UpdateOptions) (*v1alpha1.Cluster, error)
}, c *v1alpha1.Cluster, status metav1.ConditionStatus, reason string) error {
	c = c.DeepCopy()
	c.Status.Conditions = nil
	c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: "set by the benchmark", LastTransitionTime: metav1.Now()})
	_, err := clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	return err
}

// countPlacementStatusWrites is cfg with each write of a Placement's status counted in writes.
func countPlacementStatusWrites(cfg *rest.Config, writes *atomic.Int64) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return fleettest.RoundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/placements/") && strings.HasSuffix(r.URL.Path, "/status") {
				writes.Add(1)
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

// benchCapacityMoves asks a cpu more of the first chosen member of 200 placements, as a Pod
// landing on it would: each still fits, and its score falls.
func benchCapacityMoves(ctx context.Context, b *testing.B, clusters crv1alpha1.ClusterInterface, client cpversioned.Interface, ns string, keys []types.NamespacedName) {
	moved := map[string]bool{}
	for _, key := range keys[:200] {
		d, err := decision.Read(ctx, client, ns, key.Name)
		if err != nil || len(d.Clusters) == 0 {
			b.Fatalf("decision %s: %v %v", key.Name, d, err)
		}
		name := d.Clusters[0].Name
		if moved[name] {
			continue
		}
		moved[name] = true
		c, err := clusters.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		requested, allocatable := c.Status.Resources.Requested[corev1.ResourceCPU], c.Status.Resources.Allocatable[corev1.ResourceCPU]
		if allocatable.Value()-requested.Value() < 3 {
			continue // a cpu more would leave less than the 2 that fit asks
		}
		c.Status.Resources.Requested[corev1.ResourceCPU] = *resource.NewQuantity(requested.Value()+1, resource.DecimalSI)
		if _, err := clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
