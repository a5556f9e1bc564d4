package benchproc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// childEnv names, in a child, the benchmark it runs.
const childEnv = "CLUSTERREGISTRY_BENCH_CHILD"

// InChild reports whether this process is a child that Run started.
func InChild() bool { return os.Getenv(childEnv) != "" }

// Run runs fn as b's body in a child process: the test binary run again with -test.bench matching
// b alone and this process's other flags, -test.benchtime included, so that the child runs fn's
// iterations. It reports the child's metrics (ns/op among them) as b's: one child per call of
// b's function, however many iterations the parent's b.Loop counts. In the child, Run calls fn(b)
// itself.
//
// What b's parent benchmark does before its b.Run calls runs in the child too; leave what fn
// needs (simulated members, say) to fn, so that the parent starts nothing it does not use.
func Run(b *testing.B, fn func(b *testing.B)) {
	b.Helper()
	if os.Getenv(childEnv) == b.Name() {
		fn(b)
		return
	}
	args := []string{"-test.run=^$", "-test.bench=" + Pattern(b.Name()), "-test.count=1"}
	for _, a := range os.Args[1:] {
		if !dropped(a) {
			args = append(args, a)
		}
	}
	ran := false
	for b.Loop() {
		if ran {
			continue // the child ran every iteration
		}
		ran = true
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), childEnv+"="+b.Name())
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("benchmark %s in a process of its own: %v\n%s", b.Name(), err, out)
		}
		metrics, err := Metrics(out, b.Name())
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range metrics {
			b.ReportMetric(m.Value, m.Unit)
		}
	}
}

// Pattern is the -test.bench pattern that matches the benchmark named name (as b.Name() gives
// it) and nothing else.
func Pattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// dropped are the flags the parent's own run set that the child sets for itself, or must not
// share (two processes writing one profile).
func dropped(arg string) bool {
	name, _, _ := strings.Cut(strings.TrimLeft(arg, "-"), "=")
	switch name {
	case "test.run", "test.bench", "test.count", "test.cpuprofile", "test.memprofile",
		"test.blockprofile", "test.mutexprofile", "test.trace", "test.coverprofile", "test.outputdir", "test.testlogfile":
		return true
	}
	return false
}

// Metric is one value and unit of a benchmark's result line.
type Metric struct {
	Value float64
	Unit  string
}

// Metrics reads the result line of the benchmark named name from a test binary's output: its
// name (with the -GOMAXPROCS suffix), the iterations, then value-unit pairs.
func Metrics(out []byte, name string) ([]Metric, error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || (fields[0] != name && !suffixed(fields[0], name)) {
			continue
		}
		var metrics []Metric
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark %s: value %q: %w", name, fields[i], err)
			}
			metrics = append(metrics, Metric{Value: v, Unit: fields[i+1]})
		}
		return metrics, nil
	}
	return nil, fmt.Errorf("benchmark %s: no result line in its process's output:\n%s", name, out)
}

// suffixed reports whether field is name with testing's -GOMAXPROCS suffix.
func suffixed(field, name string) bool {
	rest, ok := strings.CutPrefix(field, name+"-")
	if !ok {
		return false
	}
	_, err := strconv.Atoi(rest)
	return err == nil
}
