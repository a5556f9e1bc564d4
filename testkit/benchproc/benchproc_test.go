package benchproc_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/testkit/benchproc"
)

func TestPattern(t *testing.T) {
	require.Equal(t, `^BenchmarkCaches$/^sdk-transform$`, benchproc.Pattern("BenchmarkCaches/sdk-transform"))
	// Each element matches whole, as -test.bench applies it per level: a variant whose name
	// extends another's (sdk-transform, peer-sdk) is not run with it.
	sdk := strings.Split(benchproc.Pattern("BenchmarkCaches/sdk"), "/")[1]
	require.Regexp(t, sdk, "sdk")
	require.NotRegexp(t, sdk, "sdk-transform")
	require.NotRegexp(t, sdk, "peer-sdk")
	// Metacharacters in a name are literal.
	require.NotRegexp(t, strings.Split(benchproc.Pattern("BenchmarkFanOut/members=1.0"), "/")[1], "members=100")
}

func TestMetrics(t *testing.T) {
	out := []byte("goos: linux\nBenchmarkCaches/sdk-2   \t       1\t2000 ns/op\t  312.5 KiB/member\t 3.000 goroutines/member\nBenchmarkCaches/sdk-transform-2 1 5 KiB/member\nPASS\n")
	m, err := benchproc.Metrics(out, "BenchmarkCaches/sdk")
	require.NoError(t, err)
	require.Equal(t, []benchproc.Metric{{2000, "ns/op"}, {312.5, "KiB/member"}, {3, "goroutines/member"}}, m)
	_, err = benchproc.Metrics(out, "BenchmarkCaches/peer")
	require.ErrorContains(t, err, "no result line")
}

// BenchmarkIsolated: the child's heap does not hold what the parent allocated before it, and its
// metrics come back to the parent.
var held []byte

func BenchmarkIsolated(b *testing.B) {
	if !benchproc.InChild() {
		held = make([]byte, 64<<20) // the parent's: a child that saw it would report 64 MiB more
	}
	b.Run("child", func(b *testing.B) {
		benchproc.Run(b, func(b *testing.B) {
			for b.Loop() {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(os.Getpid()), "pid")
			}
		})
	})
}

// BenchmarkIsolated, run as go test runs it: the parent reports a heap without its own 64 MiB,
// from a process that is not itself.
func TestRunReportsTheChildsMetrics(t *testing.T) {
	if benchproc.InChild() {
		t.Skip("in a child")
	}
	out, err := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkIsolated$", "-test.benchtime=1x").CombinedOutput()
	require.NoError(t, err, "%s", out)
	m, err := benchproc.Metrics(out, "BenchmarkIsolated/child")
	require.NoError(t, err, "%s", out)
	got := map[string]float64{}
	for _, x := range m {
		got[x.Unit] = x.Value
	}
	require.Less(t, got["heap-MiB"], 32.0, "the child's heap holds the parent's 64 MiB")
	require.NotZero(t, got["pid"])
	require.NotEqual(t, float64(os.Getpid()), got["pid"])
}
