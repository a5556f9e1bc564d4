package main

import (
	"archive/tar"
	"debug/buildinfo"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/require"
)

// The image, read back from the layout and the tarball it was written to: the command as its
// entrypoint, run by a numeric non-root user with a home of its own, nothing setuid, the same
// image (digest) in both and from a second assembly of the same binary; and the binary in it
// runs.
func TestImageReadBack(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the image's binary is built for Linux and run here")
	}
	dir := t.TempDir()
	binary := filepath.Join(dir, "clusterregistry")
	require.NoError(t, BuildCommand("../..", binary, runtime.GOARCH))
	opts := Options{Arch: runtime.GOARCH, Tag: "example.invalid/clusterregistry:test", Created: time.Unix(1700000000, 0).UTC()}
	img, err := Build(binary, opts)
	require.NoError(t, err)
	require.NoError(t, WriteLayout(filepath.Join(dir, "layout"), img, opts.Tag))
	require.NoError(t, WriteTarball(filepath.Join(dir, "image.tar"), img, opts.Tag))

	p, err := layout.FromPath(filepath.Join(dir, "layout"))
	require.NoError(t, err)
	index, err := p.ImageIndex()
	require.NoError(t, err)
	manifest, err := index.IndexManifest()
	require.NoError(t, err)
	require.Len(t, manifest.Manifests, 1)
	require.Equal(t, opts.Tag, manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"])
	read, err := index.Image(manifest.Manifests[0].Digest)
	require.NoError(t, err)
	fromTar, err := tarball.ImageFromPath(filepath.Join(dir, "image.tar"), nil)
	require.NoError(t, err)
	again, err := Build(binary, opts)
	require.NoError(t, err)
	want, err := img.Digest()
	require.NoError(t, err)
	for what, other := range map[string]v1.Image{"the layout": read, "a second build": again, "the tarball": fromTar} {
		got, err := other.ConfigName()
		require.NoError(t, err)
		wantCfg, err := img.ConfigName()
		require.NoError(t, err)
		require.Equal(t, wantCfg, got, "%s has another image config", what)
	}
	for what, other := range map[string]v1.Image{"the layout": read, "a second build": again} {
		got, err := other.Digest()
		require.NoError(t, err)
		require.Equal(t, want, got, "%s has another image", what)
	}

	cfg, err := read.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/bin/clusterregistry"}, cfg.Config.Entrypoint)
	require.Equal(t, "linux", cfg.OS)
	require.Equal(t, runtime.GOARCH, cfg.Architecture)
	user, group, ok := strings.Cut(cfg.Config.User, ":")
	require.True(t, ok, "user %q: want UID:GID", cfg.Config.User)
	for _, id := range []string{user, group} {
		n, err := strconv.Atoi(id)
		require.NoError(t, err, "user %q is not numeric: runAsNonRoot cannot check a name", cfg.Config.User)
		require.NotZero(t, n, "the image runs as root")
	}

	// Its files: the binary, and a passwd naming the user.
	runnable := filepath.Join(dir, "from-image")
	files, passwd := imageFiles(t, read, runnable)
	require.Contains(t, passwd, ":"+user+":"+group+":", "/etc/passwd does not name the image's user")
	require.Contains(t, files, "tmp")
	require.EqualValues(t, 0o1777, files["tmp"].Mode&0o7777)
	home := files["home/nonroot"]
	require.NotNil(t, home)
	require.Equal(t, user, strconv.Itoa(home.Uid), "the user's home is not theirs")
	bin := files["usr/local/bin/clusterregistry"]
	require.NotNil(t, bin)
	require.Zero(t, bin.Uid, "the binary must not be writable by the user who runs it")
	require.EqualValues(t, 0o755, bin.Mode&0o7777)

	requireRunnable(t, runnable)
}

// requireRunnable runs the image's binary: it knows its version and commit, whatever GOFLAGS says
// of -buildvcs, and links CA roots, to verify public servers on the image's empty base.
func requireRunnable(t *testing.T, runnable string) {
	t.Helper()
	out, err := exec.Command(runnable, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.True(t, strings.HasPrefix(string(out), "clusterregistry "), "%s", out)
	// It knows its commit, whatever GOFLAGS says of -buildvcs.
	head, err := exec.Command("git", "-C", "../..", "rev-parse", "HEAD").Output()
	require.NoError(t, err, "the test runs in a checkout")
	require.Contains(t, string(out), strings.TrimSpace(string(head)), "the image's command does not know its commit")
	// It verifies public servers on the image's empty base: the roots are linked in.
	bi, err := buildinfo.ReadFile(runnable)
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == fallbackRoots }),
		"the image has no CA certificates, and its binary does not link %s", fallbackRoots)
}

// imageFiles reads the image's files: their headers, /etc/passwd's text, and the binary, written
// to runnable. None may be setuid or setgid.
func imageFiles(t *testing.T, img v1.Image, runnable string) (map[string]*tar.Header, string) {
	t.Helper()
	files := map[string]*tar.Header{}
	var passwd string
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		files[h.Name] = h
		require.Zero(t, h.Mode&(04000|02000), "%s is setuid or setgid", h.Name)
		switch h.Name {
		case "etc/passwd":
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			passwd = string(b)
		case "usr/local/bin/clusterregistry":
			f, err := os.OpenFile(runnable, os.O_CREATE|os.O_WRONLY, 0o755)
			require.NoError(t, err)
			_, err = io.Copy(f, tr)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
	}
	return files, passwd
}

// fallbackRoots is the package that gives a binary Go's copy of the public roots.
const fallbackRoots = "golang.org/x/crypto/x509roots/fallback"

// Every command hack/image builds links the public roots: the image has no CA certificates, and
// without them a chart from any public HTTPS or OCI repository fails to verify.
func TestEveryImageCommandLinksPublicRoots(t *testing.T) {
	for _, command := range []string{"./cmd/clusterregistry", "./cmd/fleet-api"} {
		cmd := exec.Command("go", "list", "-deps", command)
		cmd.Dir = "../.."
		out, err := cmd.Output()
		require.NoError(t, err, "go list -deps %s", command)
		require.Contains(t, strings.Fields(string(out)), fallbackRoots, "%s's image could verify no public repository", command)
	}
}

// -command names the image after the package it runs: fleet-api's image runs /usr/local/bin/
// fleet-api, as the chart's fleetAPI Deployment expects (its container gives no command).
func TestImageOfAnotherCommand(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "fleet-api")
	require.NoError(t, os.WriteFile(binary, []byte("#!/bin/false\n"), 0o755))
	img, err := Build(binary, Options{Arch: "amd64", Command: "./cmd/fleet-api", Tag: "example.invalid/fleet-api:test", Created: time.Unix(1700000000, 0).UTC()})
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	require.Equal(t, []string{"/usr/local/bin/fleet-api"}, cfg.Config.Entrypoint)
	require.Equal(t, "fleet-api", cfg.Config.Labels["org.opencontainers.image.title"])
	require.Equal(t, "65532:65532", cfg.Config.User)
}

// Without -tag, an image is named after its command: fleet-api's image, loaded with docker load,
// never replaces the controllers' clusterregistry:dev.
func TestImageTagFollowsTheCommand(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "fleet-api")
	require.NoError(t, os.WriteFile(binary, []byte("#!/bin/false\n"), 0o755))
	tags := map[string]string{}
	for _, command := range []string{"./cmd/clusterregistry", "./cmd/fleet-api"} {
		out := filepath.Join(dir, path.Base(command))
		require.NoError(t, run(Options{Arch: "amd64", Command: command}, out, filepath.Join(dir, path.Base(command)+".tar"), binary))
		p, err := layout.FromPath(out)
		require.NoError(t, err)
		index, err := p.ImageIndex()
		require.NoError(t, err)
		manifest, err := index.IndexManifest()
		require.NoError(t, err)
		tags[command] = manifest.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	}
	require.Equal(t, map[string]string{
		"./cmd/clusterregistry": "ghcr.io/cluster-registry/clusterregistry:dev",
		"./cmd/fleet-api":       "ghcr.io/cluster-registry/fleet-api:dev",
	}, tags)
}
