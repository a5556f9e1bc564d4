package replicaproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A spec longer than maxEnvSpec goes to the child in a file, named after specFilePrefix (a JSON
// spec never starts with it).
const (
	maxEnvSpec     = 64 << 10
	specFilePrefix = "@file:"
)

// Proc is one replica process, as its parent sees it.
type Proc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// Start runs the test binary again as a replica: Main, in the child, finds spec (encoded as
// JSON) in the environment variable env. extraEnv are added to the child's environment
// (GOMAXPROCS=1, say). The replica is stopped when tb's test ends, if Stop was not called before.
func Start(tb testing.TB, env string, spec any, extraEnv ...string) *Proc {
	tb.Helper()
	encoded, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	value := string(encoded)
	if len(encoded) > maxEnvSpec {
		// Too long for one environment variable (Linux takes 128 KiB): the child reads a file.
		file := filepath.Join(tb.TempDir(), "replica-spec.json")
		if err := os.WriteFile(file, encoded, 0o600); err != nil {
			tb.Fatal(err)
		}
		value = specFilePrefix + file
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), env+"="+value), extraEnv...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &Proc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	tb.Cleanup(p.Stop)
	return p
}

// Send writes a request to the replica, without reading its answer: each request is answered in
// turn, so a Send is followed by a Read of its answer before the next request's.
func (p *Proc) Send(request string) { _, _ = io.WriteString(p.stdin, request+"\n") }

// Read reads the replica's next answer into answer.
func (p *Proc) Read(tb testing.TB, answer any) {
	tb.Helper()
	line, err := p.out.ReadBytes('\n')
	if err != nil || json.Unmarshal(line, answer) != nil {
		tb.Fatalf("a replica gave no answer: %v %q", err, line)
	}
}

// Ask sends a request and reads its answer into answer.
func (p *Proc) Ask(tb testing.TB, request string, answer any) {
	tb.Helper()
	p.Send(request)
	p.Read(tb, answer)
}

// Stop closes the replica's input, which ends it, and waits for it; it may be called again.
func (p *Proc) Stop() {
	_ = p.stdin.Close()
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Wait()
	}
}

// Main is a replica process's main, for TestMain to call before anything else: when env holds a
// spec, it decodes it into a new S, calls run with the replica's input and output, and reports
// the exit code with child true; otherwise it does nothing and child is false.
func Main[S any](env string, run func(spec S, in io.Reader, out io.Writer) error) (code int, child bool) {
	encoded := os.Getenv(env)
	if encoded == "" {
		return 0, false
	}
	data := []byte(encoded)
	if file, ok := strings.CutPrefix(encoded, specFilePrefix); ok {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			fmt.Fprintln(os.Stderr, "replica:", err)
			return 1, true
		}
	}
	var spec S
	if err := json.Unmarshal(data, &spec); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1, true
	}
	if err := run(spec, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "replica:", err)
		return 1, true
	}
	return 0, true
}

// Serve answers the parent's requests, a line each, with what answer returns for it, as a JSON
// line, until in closes or answer fails.
func Serve(in io.Reader, out io.Writer, answer func(request string) (any, error)) error {
	lines := bufio.NewScanner(in)
	for lines.Scan() {
		a, err := answer(lines.Text())
		if err != nil {
			return err
		}
		if err := json.NewEncoder(out).Encode(a); err != nil {
			return err
		}
	}
	return lines.Err()
}
