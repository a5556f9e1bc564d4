package localfleet_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/localfleet"
)

// fakeGo is a stand-in for the go command that "builds" a package as a small file after a pause,
// long enough that two runs of the build script overlap, and answers `go mod download -json`
// with an empty go.mod.
const fakeGo = `#!/bin/sh
case "$1 $2" in
"mod download")
  : >"$FAKE_GO_DIR/go.mod"
  echo '{"GoMod": "'"$FAKE_GO_DIR"'/go.mod"}'
  exit 0 ;;
esac
out=""; pkg=""
while [ $# -gt 0 ]; do
  case "$1" in
  -o) out="$2"; shift ;;
  build|-trimpath|-ldflags) ;;
  -*) ;;
  *) pkg="$1" ;;
  esac
  shift
done
sleep 1
printf '#!/bin/sh\n' >"$out/$(basename "$pkg")" && chmod +x "$out/$(basename "$pkg")"
`

// Two runs of hack/build-testbins.sh at once (a demo in one terminal, the tests in another) both
// succeed and leave every binary in the cache: the second waits for the first. Before the lock,
// each removed the other's half-built directory, and etcd went missing right after it was built.
func TestBuildScriptRunsTwiceAtOnce(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	run := func() *exec.Cmd {
		cmd := exec.Command("../hack/build-testbins.sh")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "FAKE_GO_DIR="+t.TempDir(), "CLUSTER_REGISTRY_SDK_CACHE="+cache)
		return cmd
	}
	first, second := run(), run()
	var out1, out2 strings.Builder
	first.Stdout, first.Stderr = &out1, &out1
	second.Stdout, second.Stderr = &out2, &out2
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	if err := second.Start(); err != nil {
		t.Fatal(err)
	}
	err1, err2 := first.Wait(), second.Wait()
	if err1 != nil || err2 != nil {
		t.Fatalf("two runs at once:\nfirst: %v\n%s\nsecond: %v\n%s", err1, out1.String(), err2, out2.String())
	}
	kube := "kubernetes-" + localfleet.KubernetesVersion + "/"
	for _, b := range []string{kube + "kube-apiserver", kube + "kubectl", kube + "kube-controller-manager", kube + "kube-scheduler",
		"etcd-" + localfleet.EtcdVersion + "/etcd", "kwok-" + localfleet.KwokVersion + "/kwok",
		"konnectivity-" + localfleet.KonnectivityVersion + "/konnectivity-agent"} {
		if _, err := os.Stat(filepath.Join(cache, b)); err != nil {
			t.Errorf("after two runs at once: %v", err)
		}
	}
	if builds := strings.Count(out1.String()+out2.String(), "build-testbins: building "); builds != 7 {
		t.Errorf("%d builds in two runs, want 7 (the second run finds the first's):\n%s\n%s", builds, out1.String(), out2.String())
	}

	// Another Kubernetes version (the version skew pass's kubectl) is built beside, not after.
	older := run()
	older.Env = append(older.Env, "KUBE_VERSION=v1.30.0")
	older.Args = append(older.Args, "--kubectl-only")
	newest := run()
	var outOlder, outNewest strings.Builder
	older.Stdout, older.Stderr, newest.Stdout, newest.Stderr = &outOlder, &outOlder, &outNewest, &outNewest
	require.NoError(t, os.RemoveAll(filepath.Join(cache, "kubernetes-"+localfleet.KubernetesVersion)))
	require.NoError(t, older.Start())
	require.NoError(t, newest.Start())
	require.NoError(t, older.Wait(), outOlder.String())
	require.NoError(t, newest.Wait(), outNewest.String())
	require.NotContains(t, outOlder.String()+outNewest.String(), "waiting for it", "one version's build waited for another's")
}
