package gobuild_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cluster-registry/sdk/testkit/gobuild"
)

// A command is built once per checkout: a second build, from another directory of the module,
// finds it up to date and leaves the very file in place; the binary runs.
func TestCommandsLinksOncePerCheckout(t *testing.T) {
	dir := gobuild.Commands(t, ".", "./testdata/hello")
	bin := filepath.Join(dir, "hello")
	out, err := exec.Command(bin).Output()
	require.NoError(t, err)
	require.Equal(t, "hello\n", string(out))
	before, err := os.Stat(bin)
	require.NoError(t, err)

	again := gobuild.Commands(t, "testdata/hello", ".")
	require.Equal(t, dir, again, "one directory per checkout, whichever directory of it builds")
	after, err := os.Stat(bin)
	require.NoError(t, err)
	// go build renames a new link into place (a new inode); an up-to-date binary is only touched.
	require.Equal(t, before.Sys().(*syscall.Stat_t).Ino, after.Sys().(*syscall.Stat_t).Ino, "linked again")
}

// A directory of binaries that others may write in, or that is a link elsewhere, is refused:
// whoever writes there chooses what the tests run.
func TestOwnDirRefusesWhatOthersCouldWrite(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, gobuild.OwnDir(dir))

	shared := filepath.Join(dir, "shared")
	require.NoError(t, os.Mkdir(shared, 0o755))
	require.NoError(t, os.Chmod(shared, 0o777)) // not subject to umask
	require.ErrorContains(t, gobuild.OwnDir(shared), "may be written by others")

	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(dir, link))
	require.ErrorContains(t, gobuild.OwnDir(link), "is not a directory")
}
