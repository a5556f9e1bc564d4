package delivery_test

import (
	"context"
	"flag"
	"fmt"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/delivery"
	"github.com/cluster-registry/sdk/multicluster"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

var benchMembers = flag.Int("members", 1000, "how many simulated members BenchmarkDelivery delivers to")

// BenchmarkDelivery: Releases of 5 ConfigMaps each, all at once, delivered by the releases
// controller to simulated members (testkit/simmembers: they serve discovery, server-side apply
// and a label-selected list and watch) that one real registry's PlacementDecision names, the
// registry holding the Releases, their status and slices. Reported, per run:
//   - s-to-ready: from the Releases' creation until every one's status says every member Ready
//     (targets: 1,000 members × 1 Release within 60 s; × 3 Releases, 3,000 deliveries, within
//     50 s, beside Rancher Fleet's 2,550 BundleDeployments Ready in about 50 s, fleet#4599);
//   - deliveries/s;
//   - status-lag-ms: from the last apply any member took to the status read saying every member
//     Ready (read every 100 ms; target: within 5 s of the last member's event);
//   - steady-writes: writes to members and to the registry over the 10 s after (target 0);
//   - member-applies: the applies members counted as changes, per delivery (5: one per object);
//   - drift-p50-ms, drift-p99-ms: with one Release, an object edited by hand on 100 members at once
//     (its data, and the field taken from the Release's manager), until each is applied back
//     (target: p99 within 5 s);
//   - s-4-waves-soak-5s: with one Release, a new revision in 4 waves of 25%, each soaking 5 s, until
//     every member is Ready at it (target: 4 × soak + 30 s = 50 s), and its ratio to the target;
//   - s-rollback-soak-5s: then a revision that fails on every member of its first wave (a kind the
//     members do not serve, after a ConfigMap it changes), with onFailure Rollback, until every
//     member is Ready back at the revision before and the Release says RolledBack (target: 4 ×
//     soak + 30 s), and its ratio to the target;
//   - KiB/delivery: heap per (member, Release), the members' clients and watch caches included,
//     beside KiB/member-floor, the heap of the same members' connections alone (one GET each).
func BenchmarkDelivery(b *testing.B) {
	if lf == nil {
		b.Skip("needs the registry: run without -short")
	}
	for _, releases := range []int{1, 3} {
		b.Run(fmt.Sprintf("members=%d/releases=%d", *benchMembers, releases), func(b *testing.B) {
			for b.Loop() {
				benchDelivery(b, *benchMembers, releases)
			}
		})
	}
}

func benchDelivery(b *testing.B, n, releases int) {
	sim := simmembers.Start(b, n, 0)
	ns := fleettest.NewSet(b, lf)
	resolver := simmembers.Resolver(b)

	floorPer := connectionFloor(resolver, sim, ns, n)

	bulk := fleettest.Unthrottled(lf.Registry.Config) // the benchmark's own writes and the controller's
	registry := versioned.NewForConfigOrDie(bulk)
	decisions := cpversioned.NewForConfigOrDie(bulk)
	members := multicluster.MembersOf(resolver, sim.Clusters(ns), multicluster.FleetOptions{})
	var chosen []decision.Chosen
	for _, m := range members {
		chosen = append(chosen, decision.Chosen{Cluster: m.Name()})
	}
	if _, err := decision.Write(context.Background(), decisions, ns, "web", chosen, decision.WriteOptions{SchedulerName: "bench"}); err != nil {
		b.Fatal(err)
	}
	heap1, _ := simmembers.SettledHeapAndGoroutines()
	ctrl, err := delivery.NewController(fleettest.Fixed(members), registry, kubernetes.NewForConfigOrDie(bulk), decisions,
		delivery.ControllerOptions{Namespace: ns, MemberConcurrency: 128})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	start := time.Now()
	createReleases(ctx, b, registry, ns, releases)
	waitReleasesReady(ctx, b, registry, ns, n, releases)
	readyAt := time.Now()
	elapsed := readyAt.Sub(start)
	// Status latency: from the last change any member applied to the status saying all are Ready
	// (as this loop saw it, every 100 ms).
	var lastApply time.Time
	for _, m := range members {
		if t := time.UnixMicro(int64(debugCount(b, m, "/debug/lastapply"))); t.After(lastApply) {
			lastApply = t
		}
	}
	heap2, _ := simmembers.SettledHeapAndGoroutines()
	before := ctrl.Writes()
	time.Sleep(10 * time.Second)
	steady := ctrl.Writes() - before

	applies := 0
	for _, m := range members[:min(20, len(members))] {
		applies += debugCount(b, m, "/debug/applies")
	}
	if releases == 1 {
		benchDrift(b, members)
	}

	if releases == 1 {
		benchWaves(ctx, b, registry, ns, n)
	}

	if releases == 1 {
		benchRollback(ctx, b, registry, ns, n)
	}

	deliveries := float64(n * releases)
	b.ReportMetric(elapsed.Seconds(), "s-to-ready")
	b.ReportMetric(float64(readyAt.Sub(lastApply).Milliseconds()), "status-lag-ms")
	b.ReportMetric(deliveries/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(steady), "steady-writes")
	b.ReportMetric(float64(applies)/float64(min(20, len(sim.Servers))*releases), "member-applies/delivery")
	b.ReportMetric(float64(heap2-heap1)/deliveries/1024, "KiB/delivery")
	b.ReportMetric(floorPer/1024, "KiB/member-floor")
}

// connectionFloor is the heap a member costs with its connection alone, one GET each: the floor
// beneath what delivery costs.
func connectionFloor(resolver *access.Resolver, sim *simmembers.Members, ns string, n int) float64 {
	heap0, _ := simmembers.SettledHeapAndGoroutines()
	floorMembers := multicluster.MembersOf(resolver, sim.Clusters(ns), multicluster.FleetOptions{})
	multicluster.ForEach(context.Background(), floorMembers, func(ctx context.Context, m *multicluster.Member) error {
		kube, err := m.Kubernetes(ctx)
		if err != nil {
			return err
		}
		_, err = kube.Discovery().ServerVersion()
		return err
	}, multicluster.Options{})
	heapFloor, _ := simmembers.SettledHeapAndGoroutines()
	goruntime.KeepAlive(floorMembers) // measured with the members held
	return float64(heapFloor-heap0) / float64(n)
}

// createReleases creates Releases app-0 to app-(releases-1), of 5 ConfigMaps each, on placement web.
func createReleases(ctx context.Context, b *testing.B, registry versioned.Interface, ns string, releases int) {
	for r := range releases {
		var objs []runtime.RawExtension
		for i := range 5 {
			objs = append(objs, runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-%d-%d"},"data":{"k":"v"}}`, r, i)})
		}
		rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", r)}, Spec: v1alpha1.ReleaseSpec{
			Source: v1alpha1.ReleaseSource{Manifests: objs}, Placement: v1alpha1.ReleasePlacement{Name: "web"}}}
		if _, err := registry.ClusterregistryV1alpha1().Releases(ns).Create(ctx, rel, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// waitReleasesReady waits, 5 minutes at most, until every Release of ns is Ready on all n members.
func waitReleasesReady(ctx context.Context, b *testing.B, registry versioned.Interface, ns string, n, releases int) {
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		list, err := registry.ClusterregistryV1alpha1().Releases(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		ready := 0
		for _, r := range list.Items {
			if r.Status.ObservedGeneration == r.Generation && int(r.Status.Ready) == n {
				ready++
			}
		}
		if ready == releases {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d Releases ready on every member after 5 minutes", ready, releases)
		}
	}
}

// benchDrift edits one object by hand on each of 100 members at once, and reports how long until
// each is applied back, from the edit (target: p99 within 5 s).
func benchDrift(b *testing.B, members []*multicluster.Member) {
	drifted := members[:min(100, len(members))]
	for _, m := range drifted {
		if debugCount(b, m, "/debug/drift") != 1 {
			b.Fatalf("%s: nothing to drift", m)
		}
	}
	var took []time.Duration
	for deadline := time.Now().Add(time.Minute); len(took) < len(drifted); time.Sleep(50 * time.Millisecond) {
		took = took[:0]
		for _, m := range drifted {
			took = append(took, debugTimes(b, m, "/debug/corrections")...)
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d drifted objects applied back within a minute", len(took), len(drifted))
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "drift-p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Milliseconds()), "drift-p99-ms")
}

// benchWaves rolls a new revision of app-0 out in 4 waves of a quarter each, each soaking 5 s,
// and reports how long it took (target: 4 × soak + 30 s).
func benchWaves(ctx context.Context, b *testing.B, registry versioned.Interface, ns string, n int) {
	const soak = 5
	var first string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := registry.ClusterregistryV1alpha1().Releases(ns).Get(ctx, "app-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		first = cur.Status.Revision
		cur.Spec.Source.Manifests[0] = runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-0-0"},"data":{"k":"v2"}}`)}
		cur.Spec.Rollout = &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutConcurrency, MaxConcurrency: ptr.To(intstr.FromString("25%")), SoakSeconds: soak}
		_, err = registry.ClusterregistryV1alpha1().Releases(ns).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for deadline := start.Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := registry.ClusterregistryV1alpha1().Releases(ns).Get(ctx, "app-0", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Status.ObservedGeneration == r.Generation && r.Status.Revision != first && int(r.Status.Ready) == n && r.Status.Waves == 4 &&
			!meta.IsStatusConditionTrue(r.Status.Conditions, v1alpha1.ReleaseProgressing) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the new revision not rolled out in 5 minutes: %+v", r.Status)
		}
	}
	took := time.Since(start)
	b.ReportMetric(took.Seconds(), "s-4-waves-soak-5s")
	b.ReportMetric(took.Seconds()/(4*soak+30), "4-waves-ratio-to-target")
}

// debugCount reads a simulated member's counter over its existing connection.
func debugCount(b *testing.B, m *multicluster.Member, path string) int {
	kube, err := m.Kubernetes(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		b.Fatalf("%s answered %q", path, raw)
	}
	return n
}

// debugTimes reads a simulated member's list of durations (microseconds, comma-separated).
func debugTimes(b *testing.B, m *multicluster.Member, path string) []time.Duration {
	kube, err := m.Kubernetes(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	var out []time.Duration
	for _, f := range strings.Split(string(raw), ",") {
		if f == "" {
			continue
		}
		us, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			b.Fatalf("%s answered %q", path, raw)
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	return out
}

// BenchmarkChartDelivery (run by hack/bench.sh with BenchmarkDelivery): one Release of a chart (a packaged chart of 5 ConfigMaps in a ConfigMap
// of the set) whose values take each member's region from its Cluster's label, over three
// regions, delivered to the simulated members as BenchmarkDelivery's are. Reported: renders (the
// target: 3, one per region, not one per member; plus the one with the Release's values alone
// that checks the chart), s-to-ready (target: every member Ready in
// status within 60 s) and deliveries/s.
func BenchmarkChartDelivery(b *testing.B) {
	if lf == nil {
		b.Skip("needs the registry: run without -short")
	}
	b.Run(fmt.Sprintf("members=%d/regions=3", *benchMembers), func(b *testing.B) {
		for b.Loop() {
			benchChartDelivery(b, *benchMembers)
		}
	})
}

func benchChartDelivery(b *testing.B, n int) {
	sim := simmembers.Start(b, n, 0)
	ns := fleettest.NewSet(b, lf)
	resolver := simmembers.Resolver(b)
	clusters := sim.Clusters(ns)
	regions := []string{"eu-west", "us-east", "ap-south"}
	for i := range clusters {
		clusters[i].Labels = map[string]string{"topology.kubernetes.io/region": regions[i%len(regions)]}
	}
	bulk := fleettest.Unthrottled(lf.Registry.Config)
	registry := versioned.NewForConfigOrDie(bulk)
	kube := kubernetes.NewForConfigOrDie(bulk)
	decisions := cpversioned.NewForConfigOrDie(bulk)
	members := multicluster.MembersOf(resolver, clusters, multicluster.FleetOptions{})
	var chosen []decision.Chosen
	for _, m := range members {
		chosen = append(chosen, decision.Chosen{Cluster: m.Name()})
	}
	if _, err := decision.Write(context.Background(), decisions, ns, "web", chosen, decision.WriteOptions{SchedulerName: "bench"}); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{"Chart.yaml": "apiVersion: v2\nname: regional\nversion: 0.1.0\n", "values.yaml": "region: none\n"}
	for i := range 5 {
		files[fmt.Sprintf("templates/cm-%d.yaml", i)] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-%d}\ndata: {region: {{ .Values.region | quote }}}\n", i)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "chart"},
		BinaryData: map[string][]byte{"chart.tgz": packagedChart(b, "regional", files)}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	ctrl, err := delivery.NewController(fleettest.Fixed(members), registry, kube, decisions, delivery.ControllerOptions{Namespace: ns, MemberConcurrency: 128})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	renders := delivery.ChartRenders()
	start := time.Now()
	rel := &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "regional"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{ConfigMap: &v1alpha1.ReleaseChartConfigMap{Name: "chart"},
			MemberValues: []v1alpha1.ReleaseMemberValue{{Path: "region", From: v1alpha1.MemberValueLabel, Key: "topology.kubernetes.io/region"}}}},
		Placement: v1alpha1.ReleasePlacement{Name: "web"}}}
	if _, err := registry.ClusterregistryV1alpha1().Releases(ns).Create(ctx, rel, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := registry.ClusterregistryV1alpha1().Releases(ns).Get(ctx, "regional", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if r.Status.ObservedGeneration == r.Generation && int(r.Status.Ready) == n {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not ready on every member after 5 minutes: %+v", r.Status)
		}
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(delivery.ChartRenders()-renders), "renders")
	b.ReportMetric(elapsed.Seconds(), "s-to-ready")
	b.ReportMetric(float64(n)/elapsed.Seconds(), "deliveries/s")
}

// benchRollback rolls out a revision of Release app-0 that fails on its first wave's members, with
// onFailure Rollback, and reports how long until every member is Ready back at the revision
// before (BenchmarkDelivery says more).
func benchRollback(ctx context.Context, b *testing.B, registry versioned.Interface, ns string, n int) {
	const soak = 5
	releases := registry.ClusterregistryV1alpha1().Releases(ns)
	var good string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := releases.Get(ctx, "app-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		good = cur.Status.Revision
		cur.Spec.Source.Manifests[0] = runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"app-0-0"},"data":{"k":"v3"}}`)}
		cur.Spec.Source.Manifests = append(cur.Spec.Source.Manifests, runtime.RawExtension{Raw: []byte(
			`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"not-served"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"c","image":"c"}]}}}}`)})
		cur.Spec.Rollout = &v1alpha1.ReleaseRollout{Strategy: v1alpha1.RolloutConcurrency, MaxConcurrency: ptr.To(intstr.FromString("25%")),
			SoakSeconds: soak, OnFailure: v1alpha1.FailureRollback}
		_, err = releases.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for deadline := start.Add(5 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := releases.Get(ctx, "app-0", metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		stalled := meta.FindStatusCondition(r.Status.Conditions, v1alpha1.ReleaseStalled)
		if r.Status.ObservedGeneration == r.Generation && r.Status.Revision == good && int(r.Status.Ready) == n &&
			stalled != nil && stalled.Reason == "RolledBack" {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("not rolled back in 5 minutes: %+v", r.Status)
		}
	}
	took := time.Since(start)
	b.ReportMetric(took.Seconds(), "s-rollback-soak-5s")
	b.ReportMetric(took.Seconds()/(4*soak+30), "rollback-ratio-to-target")
}
