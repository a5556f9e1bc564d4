package helmrelease_test

import (
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/helmrelease"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

var helmMembers = flag.Int("helm-members", 100, "how many member identities BenchmarkHelmMode installs on and upgrades")

// BenchmarkHelmMode: Helm mode's install, then an upgrade, on 100 members (-helm-members), 10 at a time, as the
// releases controller runs them. The members are 100 member identities on the package's one real
// API server (each with its own discovery, mapper and capabilities in its helmrelease.Member, and a namespace of
// its own): what is measured is the SDK's side, not the servers'. Reported: full discoveries per
// member over both operations (the target: at most 1), the heap the Members and the releases keep per
// member after them (live heap after GC, over the start), and ms per operation; beside Flux's
// published 1,000 HelmReleases in 8 minutes at 490 MiB, s-install-all (every member's install,
// the first pass) and heap-MiB (all the members' after both).
func BenchmarkHelmMode(b *testing.B) {
	realservers.Required(b)
	members, concurrency := *helmMembers, 10
	kube := kubernetes.NewForConfigOrDie(server.Registry.Config)
	archive := chartAt(b, "0.1.0")
	upgraded := chartAt(b, "0.2.0")
	for i := 0; b.Loop(); i++ {
		run := fmt.Sprintf("bench-%d", i)
		for m := range members {
			_, err := kube.CoreV1().Namespaces().Create(b.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-m%d", run, m)}}, metav1.CreateOptions{})
			if err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		ms := make([]*helmrelease.Member, members)
		counts := make([]*atomic.Int64, members)
		for m := range members {
			ms[m], counts[m] = countedMember(b, server.Registry.Config)
		}
		start := time.Now()
		var installed time.Duration
		for pass, ch := range [][]byte{archive, upgraded} {
			sem := make(chan struct{}, concurrency)
			var wg sync.WaitGroup
			errs := make(chan error, members)
			for m := range members {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					ns := fmt.Sprintf("%s-m%d", run, m)
					_, err := helmrelease.Apply(b.Context(), ms[m].Getter(ns), "shop", ns, ch, map[string]any{"greeting": ns}, helmrelease.Options{Timeout: time.Minute})
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			if pass == 0 {
				installed = time.Since(start)
			}
		}
		elapsed := time.Since(start)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		var discoveries int64
		for _, n := range counts {
			discoveries += n.Load()
		}
		b.ReportMetric(float64(discoveries)/float64(members), "discoveries/member")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/float64(members)/1024, "KiB-heap/member")
		b.ReportMetric(float64(elapsed.Milliseconds())/float64(2*members), "ms/operation")
		b.ReportMetric(installed.Seconds(), "s-install-all")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20), "heap-MiB")
		runtime.KeepAlive(ms)
	}
}
