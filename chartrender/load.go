package chartrender

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// Limits on a packaged chart.
const (
	// MaxArchiveBytes bounds a packaged chart (.tgz) as given.
	MaxArchiveBytes = 4 << 20
	// MaxUnpackedBytes bounds what it unpacks to, every file together.
	MaxUnpackedBytes = 16 << 20
)

// Chart is a packaged chart, checked, and the digest of its archive.
type Chart struct {
	archive []byte
	meta    *chart.Metadata
	// Digest is "sha256:" and the archive's SHA-256, as OCI registries name blobs.
	Digest string
}

// Name and Version are the chart's, from its Chart.yaml.
func (c *Chart) Name() string    { return c.meta.Name }
func (c *Chart) Version() string { return c.meta.Version }

// load is a chart of its own: rendering processes the dependencies for the values given, which
// changes the chart, so that renders share none.
func (c *Chart) load() (*chart.Chart, error) { return loader.LoadArchive(bytes.NewReader(c.archive)) }

// ErrTooLarge is wrapped by Load's errors for a chart over MaxArchiveBytes or MaxUnpackedBytes.
var ErrTooLarge = errors.New("chart too large")

// Load loads a packaged chart (what `helm package` writes: a gzipped tar). A chart over the
// limits, or that Helm's loader refuses, is refused with why.
func Load(archive []byte) (*Chart, error) {
	if len(archive) > MaxArchiveBytes {
		return nil, fmt.Errorf("%w: the archive is %d bytes, more than %d", ErrTooLarge, len(archive), MaxArchiveBytes)
	}
	// Measured before Helm's loader reads it: its own limit is process-wide, and large.
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("not a packaged chart (a gzipped tar): %w", err)
	}
	n, err := io.Copy(io.Discard, io.LimitReader(gz, MaxUnpackedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("not a packaged chart (a gzipped tar): %w", err)
	}
	if n > MaxUnpackedBytes {
		return nil, fmt.Errorf("%w: it unpacks to more than %d bytes", ErrTooLarge, MaxUnpackedBytes)
	}
	c, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	sum := sha256.Sum256(archive)
	return &Chart{archive: bytes.Clone(archive), meta: c.Metadata, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}
