package main

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

var benchMembers = flag.Int("bench-members", 1000, "simulated members of BenchmarkOptikonLists")

// BenchmarkOptikonLists answers what each open Optikon UI asks twice a second, GET /v0/clusters
// and GET /v0/releases, at 1,000 simulated members (each running 3 Nodes, 30 Pods, 5 Deployments
// and one Helm release), beside fleet-api's own GET /clusters of the same members: CPU per
// answer and answers per second per core (the process's CPU time, so the caches' and the
// encoder's work count), bytes per answer, and requests sent to the registry per answer (the
// caller's authorization, kept 10 s, amortized). Members are asked nothing per answer:
// TestOptikonPollsAskNothing counts that on real members.
//
//	go test ./cmd/fleet-api -run '^$' -bench BenchmarkOptikonLists -benchtime 200x
func BenchmarkOptikonLists(b *testing.B) {
	if lf == nil {
		b.Skip("needs the local fleet: run without -short")
	}
	ns, h, registry := optikonBench(b)
	for _, c := range []struct{ name, path string }{{"v0-clusters", "/v0/clusters"}, {"v0-releases", "/v0/releases"}, {"peer-clusters", "/clusters"}} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, c.path+"?namespace="+ns, nil)
			req.Host = "bench"
			rows := benchRows(b, h, req)
			before, cpu0, bytes := registry.Load(), simmembers.ProcessCPU(), 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				// The authenticator takes the token out of the request it accepts, as the
				// registry's does: each answer is asked for anew.
				req.Header.Set("Authorization", "Bearer "+operatorToken)
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d: %s", c.path, rec.Code, rec.Body.String())
				}
				bytes += rec.Body.Len()
			}
			cpu := simmembers.ProcessCPU() - cpu0
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/answer")
			b.ReportMetric(float64(b.N)/cpu.Seconds(), "answers/s/core")
			b.ReportMetric(float64(bytes)/float64(b.N)/1024, "KiB/answer")
			b.ReportMetric(float64(rows), "rows")
			b.ReportMetric(float64(registry.Load()-before)/float64(b.N), "registry-req/answer")
		})
	}
}

// optikonBench starts fleet-api on a set of *benchMembers simulated members with one Helm-mode
// Release (which each member's Helm storage reports), its caches synced, and returns the set,
// the server's handler, and the count of requests it sent to the registry.
func optikonBench(b *testing.B) (string, http.Handler, *atomic.Int64) {
	sim := simmembers.Start(b, *benchMembers, 0)
	ns := fleettest.NewSet(b, lf)
	fleettest.CreateClusters(b, lf.Registry.Config, ns, sim.Clusters(ns), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	_, err := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Releases(ns).Create(ctx, &v1alpha1.Release{
		ObjectMeta: metav1.ObjectMeta{Name: simmembers.HelmRelease}, Spec: v1alpha1.ReleaseSpec{Placement: v1alpha1.ReleasePlacement{Name: "all"}, TargetNamespace: simmembers.HelmNamespace,
			Source: v1alpha1.ReleaseSource{Chart: &v1alpha1.ReleaseChartSource{Secret: &v1alpha1.ReleaseChartConfigMap{Name: "web-chart"}, Mode: v1alpha1.ChartModeHelm}}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	registry := &atomic.Int64{}
	cfg := countingConfig(lf.Registry.Config, registry)
	s, err := startServer(ctx, versioned.NewForConfigOrDie(cfg), simmembers.Resolver(b), []string{ns})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.stop)
	for _, err := range []error{s.nodes.WaitForCacheSync(ctx, 5*time.Minute), s.pods.WaitForCacheSync(ctx, 5*time.Minute),
		s.deployments.WaitForCacheSync(ctx, 5*time.Minute), s.helm.WaitForCacheSync(ctx, 5*time.Minute)} {
		if err != nil {
			b.Fatal(err)
		}
	}
	g, err := newGuard(cfg, nil, []string{"bench"})
	if err != nil {
		b.Fatal(err)
	}
	return ns, s.routes(g), registry
}

// benchRows answers req once, waiting until every member's row is there, and says how many.
func benchRows(b *testing.B, h http.Handler, req *http.Request) int {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		rec := httptest.NewRecorder()
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d: %s", req.URL.Path, rec.Code, rec.Body.String())
		}
		var list []json.RawMessage
		var wrapped struct{ Clusters []json.RawMessage }
		n := 0
		if json.Unmarshal(rec.Body.Bytes(), &list) == nil {
			n = len(list)
		} else if json.Unmarshal(rec.Body.Bytes(), &wrapped) == nil {
			n = len(wrapped.Clusters)
		}
		if n == *benchMembers || time.Now().After(deadline) {
			return n
		}
		time.Sleep(time.Second)
	}
}
