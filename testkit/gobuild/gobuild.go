package gobuild

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// Commands builds pkgs (as `go build` takes them, relative to dir, the module's directory or one
// under it) and returns the directory that holds the binaries, named as `go build -o dir/` names
// them. Every call from this checkout, in any test process, shares the directory; a change to the
// sources or build flags (GOFLAGS) links anew.
//
// Builds are serialized by a lock on the directory: two test binaries that build the same
// command at once would otherwise both link it. A binary another process runs is never written
// over: `go build` renames a new binary into place.
func Commands(t testing.TB, dir string, pkgs ...string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("gobuild: %v", err)
	}
	root := abs
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatalf("gobuild: no go.mod in %s or above it", abs)
		}
		root = parent
	}
	// One directory per module checkout, beside the go command's own work directories (TMPDIR),
	// so that its rename into place stays on one file system: a copy over a running binary
	// fails with "text file busy".
	sum := sha256.Sum256([]byte(root))
	out := filepath.Join(os.TempDir(), "cluster-registry-sdk-bin", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatalf("gobuild: %v", err)
	}
	// TMPDIR may be shared with other users: a directory someone else made, or may write in,
	// could hand the tests a program of theirs to run.
	for _, d := range []string{filepath.Dir(out), out} {
		if err := ownDir(d); err != nil {
			t.Fatalf("gobuild: %v; remove it, or set TMPDIR to a directory of your own", err)
		}
	}
	unlock := lock(t, filepath.Join(out, ".lock"))
	defer unlock()
	build := exec.CommandContext(t.Context(), "go", append([]string{"build", "-o", out + "/"}, pkgs...)...)
	build.Dir = abs
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("gobuild: go build %v in %s: %v\n%s", pkgs, abs, err, b)
	}
	return out
}

// lock holds an exclusive flock on path until the returned func is called; the kernel drops it
// if the process dies.
func lock(t testing.TB, path string) (unlock func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatalf("gobuild: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("gobuild: locking %s: %v", path, err)
	}
	return func() { f.Close() }
}

// ownDir reports an error unless path is a directory, not a symbolic link, that this user owns
// and nobody else may write in.
func ownDir(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case !ok || int(st.Uid) != os.Getuid():
		return fmt.Errorf("%s is not owned by this user", path)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s may be written by others (mode %v)", path, fi.Mode().Perm())
	}
	return nil
}
