package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cpversioned "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/decision"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// BenchmarkDiffRelease: clusterregistry diff release of a Release of 5 ConfigMaps across 100
// members, as a user runs it (resolving each member, discovering it, dry-running each object).
// The members are 100 Clusters of one cluster set that all point at the shared fleet's member-1,
// a real API server: what is measured is the command's side and the real dry runs, not 100
// servers' CPU. Reported: s-100-members (target: at most 10 s) and its ratio to the target.
func BenchmarkDiffRelease(b *testing.B) {
	realservers.Required(b)
	const members = 100
	lf := shared.Fleet(b)
	ctx := context.Background()
	if err := fleettest.InstallPlacementDecisionCRD(ctx, lf.Registry.Config); err != nil {
		b.Fatal(err)
	}
	ns := fleettest.CopySet(b, lf, "member-1")
	registry := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1()
	one, err := registry.Clusters(ns).Get(ctx, "member-1", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	chosen := []decision.Chosen{{Cluster: types.NamespacedName{Namespace: ns, Name: "member-1"}}}
	for i := 1; i < members; i++ {
		c := &v1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("m%03d", i), Namespace: ns, Labels: one.Labels}, Spec: one.Spec}
		if _, err := registry.Clusters(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		chosen = append(chosen, decision.Chosen{Cluster: types.NamespacedName{Namespace: ns, Name: c.Name}})
	}
	if _, err := decision.Write(ctx, cpversioned.NewForConfigOrDie(lf.Registry.Config), ns, "web", chosen, decision.WriteOptions{SchedulerName: "bench"}); err != nil {
		b.Fatal(err)
	}
	var objs []runtime.RawExtension
	for i := range 5 {
		objs = append(objs, runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%s-%d"},"data":{"k":"v"}}`, ns, i)})
	}
	if _, err := registry.Releases(ns).Create(ctx, &v1alpha1.Release{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: v1alpha1.ReleaseSpec{
		Source: v1alpha1.ReleaseSource{Manifests: objs}, Placement: v1alpha1.ReleasePlacement{Name: "web"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		start := time.Now()
		var errOut syncBuffer
		if code := run(ctx, []string{"--kubeconfig", lf.Registry.Kubeconfig, "-n", ns, "diff", "release", "web"}, io.Discard, &errOut); code != 1 {
			b.Fatalf("diff release exited %d, want 1 (changes): %s", code, errOut.String())
		}
		took := time.Since(start)
		b.ReportMetric(took.Seconds(), "s-100-members")
		b.ReportMetric(took.Seconds()/10, "ratio-to-target")
	}
}
