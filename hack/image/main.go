package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

func main() {
	var opts Options
	var out, tarball, binary string
	flag.StringVar(&out, "out", "_output/image", "the OCI image layout to write (a directory; an image already there is replaced)")
	flag.StringVar(&tarball, "tarball", "", "also write a tarball that docker load takes, here")
	flag.StringVar(&opts.Arch, "arch", runtime.GOARCH, "the architecture to build for")
	flag.StringVar(&opts.Tag, "tag", "", "the image's reference name (in the layout's index and the tarball); ghcr.io/cluster-registry/NAME:dev when empty, NAME the command's (clusterregistry, fleet-api)")
	flag.StringVar(&binary, "binary", "", "an already built Linux binary of -command to use, instead of building one")
	flag.StringVar(&opts.Command, "command", "./cmd/clusterregistry", "the module's package the image runs: ./cmd/clusterregistry, or ./cmd/fleet-api")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected arguments %q\n", flag.Args())
		os.Exit(2)
	}
	if err := run(opts, out, tarball, binary); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(opts Options, out, tarball, binary string) error {
	created, err := sourceDate()
	if err != nil {
		return err
	}
	opts.Created = created
	opts.Tag = opts.tag()
	if binary == "" {
		dir, err := os.MkdirTemp("", "clusterregistry-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		binary = filepath.Join(dir, opts.name())
		if err := opts.build(".", binary); err != nil {
			return err
		}
	}
	img, err := Build(binary, opts)
	if err != nil {
		return err
	}
	if err := WriteLayout(out, img, opts.Tag); err != nil {
		return err
	}
	if tarball != "" {
		if err := WriteTarball(tarball, img, opts.Tag); err != nil {
			return err
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (%s/%s)\n", opts.Tag, d, "linux", opts.Arch)
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH, or the commit's time, or the Unix epoch outside a checkout.
func sourceDate() (time.Time, error) {
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want seconds since the epoch", v)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	b, err := exec.Command("git", "log", "-1", "--format=%ct").Output()
	if err != nil {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Unix(0, 0).UTC(), nil
	}
	return time.Unix(n, 0).UTC(), nil
}
