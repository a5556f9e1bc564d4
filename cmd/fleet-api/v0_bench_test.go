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
	"github.com/cluster-registry/sdk/internal/answercache"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/simmembers"
)

var benchMembers = flag.Int("bench-members", 1000, "simulated members of BenchmarkOptikonLists")

// BenchmarkOptikonLists answers what each open Optikon UI asks twice a second, GET /v0/clusters
// and GET /v0/releases, at 1,000 simulated members (each running 3 Nodes, 30 Pods, 5 Deployments
// and one Helm release), beside fleet-api's own GET /clusters of the same members, each three
// ways in the same run: computed (each answer computed and encoded, as before the answers were
// kept: a Cache that keeps none), kept (a poll of an unchanged fleet, sent the kept answer), and
// 304 (the same poll sending the last ETag). Reported: CPU per answer and answers per second per
// core (the process's CPU time, so the caches' and the encoder's work count), bytes per answer,
// requests sent to the registry per answer (the caller's authorization, kept 10 s, amortized),
// and the memory the kept answers hold. Members are asked nothing per answer:
// TestOptikonPollsAskNothing counts that on real members.
//
//	go test ./cmd/fleet-api -run '^$' -bench BenchmarkOptikonLists -benchtime 200x
func BenchmarkOptikonLists(b *testing.B) {
	if lf == nil {
		b.Skip("needs the local fleet: run without -short")
	}
	ns, s, h, registry := optikonBench(b)
	kept := s.answers
	for _, c := range []struct{ name, path string }{{"v0-clusters", "/v0/clusters"}, {"v0-releases", "/v0/releases"}, {"peer-clusters", "/clusters"}} {
		req := httptest.NewRequest(http.MethodGet, c.path+"?namespace="+ns, nil)
		req.Host = "bench"
		rows, etag := benchRows(b, h, req)
		for _, arm := range []struct {
			name    string
			answers *answercache.Cache[inputs]
			etag    string
			code    int
		}{{"computed", answercache.New[inputs](0, 0), "", http.StatusOK}, {"kept", kept, "", http.StatusOK}, {"304", kept, etag, http.StatusNotModified}} {
			b.Run(c.name+"/"+arm.name, func(b *testing.B) {
				s.answers = arm.answers
				defer func() { s.answers = kept }()
				benchAnswers(b, h, req, arm.etag, arm.code, registry)
				b.ReportMetric(float64(rows), "rows")
				b.ReportMetric(float64(kept.Bytes())/1024, "KiB-kept")
			})
		}
	}
}

// benchAnswers asks h for req's answer b.N times, each time anew (with If-None-Match etag when
// given), and reports what the answers cost.
func benchAnswers(b *testing.B, h http.Handler, req *http.Request, etag string, code int, registry *atomic.Int64) {
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
		defer req.Header.Del("If-None-Match")
	}
	before, cpu0, bytes := registry.Load(), simmembers.ProcessCPU(), 0
	for b.Loop() {
		w := &sink{header: http.Header{}}
		// The authenticator takes the token out of the request it accepts, as the registry's
		// does: each answer is asked for anew.
		req.Header.Set("Authorization", "Bearer "+operatorToken)
		h.ServeHTTP(w, req)
		if w.code != code {
			b.Fatalf("%s: %d, want %d", req.URL.Path, w.code, code)
		}
		bytes += w.written
	}
	cpu := simmembers.ProcessCPU() - cpu0
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/1e6, "cpu-ms/answer")
	b.ReportMetric(float64(b.N)/cpu.Seconds(), "answers/s/core")
	b.ReportMetric(float64(bytes)/float64(b.N)/1024, "KiB/answer")
	b.ReportMetric(float64(registry.Load()-before)/float64(b.N), "registry-req/answer")
}

// optikonBench starts fleet-api on a set of *benchMembers simulated members with one Helm-mode
// Release (which each member's Helm storage reports), its caches synced, and returns the set,
// the server's handler, and the count of requests it sent to the registry.
func optikonBench(b *testing.B) (string, *server, http.Handler, *atomic.Int64) {
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
	return ns, s, s.routes(g), registry
}

// benchRows answers req once, waiting until every member's row is there, and says how many, with
// the answer's ETag.
func benchRows(b *testing.B, h http.Handler, req *http.Request) (int, string) {
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
			return n, rec.Header().Get("ETag")
		}
		time.Sleep(time.Second)
	}
}

// sink is the ResponseWriter of the benchmark's answers: it copies what it is sent into a buffer
// of its own, as a write to a socket copies it into the kernel's, and keeps only the count. (An
// httptest.ResponseRecorder grows a buffer to hold each answer whole: at 1.2 MB that cost the
// process more than the kept answer itself.)
type sink struct {
	header  http.Header
	code    int
	written int
	buf     [32 << 10]byte
}

func (s *sink) Header() http.Header { return s.header }

func (s *sink) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}

func (s *sink) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	for rest := p; len(rest) > 0; {
		rest = rest[copy(s.buf[:], rest):]
	}
	s.written += len(p)
	return len(p), nil
}
