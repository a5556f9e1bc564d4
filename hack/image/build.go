package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: numeric, so that a pod's runAsNonRoot can be checked without reading the
// image's /etc/passwd, and the one distroless and chainguard images use.
const (
	uid  = 65532
	home = "/home/nonroot"
	// binDir holds the image's one binary, its entrypoint.
	binDir = "/usr/local/bin"
)

// Options say what image to build.
type Options struct {
	// Arch is the architecture (GOARCH) of the binary.
	Arch string
	// Command is the package of the module the image runs: "./cmd/clusterregistry" when empty,
	// or "./cmd/fleet-api". The binary and the image are named after its last element.
	Command string
	// Tag is the image's reference name: ghcr.io/cluster-registry/NAME:dev when empty, NAME the
	// command's, so that fleet-api's image never takes the controllers' name.
	Tag string
	// Created is the image's creation time and every file's time.
	Created time.Time
}

// command is opts.Command, or the clusterregistry command.
func (o Options) command() string {
	if o.Command == "" {
		return "./cmd/clusterregistry"
	}
	return o.Command
}

// name is the image's binary's name: the last element of its command's package.
func (o Options) name() string { return path.Base(o.command()) }

// tag is opts.Tag, or the command's own development tag.
func (o Options) tag() string {
	if o.Tag != "" {
		return o.Tag
	}
	return "ghcr.io/cluster-registry/" + o.name() + ":dev"
}

// BuildCommand builds the clusterregistry command of the module in dir, static (no cgo) for Linux
// and arch, without local paths in it, to out.
func BuildCommand(dir, out, arch string) error {
	return Options{Arch: arch}.build(dir, out)
}

// build builds opts' command of the module in dir, static for Linux and opts.Arch, to out. The
// binary records the checkout's commit (`version` prints it) whatever GOFLAGS says of -buildvcs:
// an image must say which sources it holds. Outside a checkout there is none to record.
func (o Options) build(dir, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=auto", "-ldflags=-s -w", "-o", out, o.command())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+o.Arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for linux/%s: %w\n%s", o.command(), o.Arch, err, b)
	}
	return nil
}

// Build is the image of binary: one layer (the binary, a passwd and group that name the user,
// its home, and /tmp) on an empty base, as OCI media types.
func Build(binary string, opts Options) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("reading the command: %w", err)
	}
	entrypoint := path.Join(binDir, opts.name())
	files, err := layerTar(data, entrypoint, opts.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(files)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: opts.Created}, CreatedBy: "hack/image: " + opts.name() + " on an empty base", Comment: "the command, /etc/passwd and /etc/group, " + home + ", /tmp",
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = "linux", opts.Arch, v1.Time{Time: opts.Created}
	cfg.Config.Entrypoint = []string{entrypoint}
	cfg.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cfg.Config.WorkingDir = home
	cfg.Config.Env = []string{"PATH=/usr/local/bin", "HOME=" + home}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":  opts.name(),
		"org.opencontainers.image.source": "https://github.com/cluster-registry/sdk",
	}
	return mutate.ConfigFile(img, cfg)
}

// layerTar is the layer's files, owned by root but for the user's home, in a fixed order with
// fixed times, so that the same binary always makes the same layer.
func layerTar(binary []byte, entrypoint string, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:%s:/sbin/nologin\n", uid, uid, home)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", uid)
	entries := []struct {
		name     string
		mode     int64
		owner    int
		contents []byte
		dir      bool
	}{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, contents: []byte(group)},
		{name: "etc/passwd", mode: 0o644, contents: []byte(passwd)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, owner: uid, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: "usr/local/bin/", mode: 0o755, dir: true},
		{name: path.Clean(entrypoint)[1:], mode: 0o755, contents: binary},
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.owner, Gid: e.owner, ModTime: created, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img, named tag, as the only image of an OCI image layout at dir.
func WriteLayout(dir string, img v1.Image, tag string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("writing the image layout %s: %w", dir, err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": tag})); err != nil {
		return fmt.Errorf("writing the image layout %s: %w", dir, err)
	}
	return nil
}

// WriteTarball writes img, named tag, as a tarball that docker load takes.
func WriteTarball(file string, img v1.Image, tag string) error {
	ref, err := name.ParseReference(tag)
	if err != nil {
		return fmt.Errorf("--tag %q: %w", tag, err)
	}
	if err := tarball.WriteToFile(file, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return nil
}
