package chartrender

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"maps"
	"slices"
)

// Package packages a chart's files (paths relative to the chart's directory, "Chart.yaml",
// "templates/x.yaml") as helm package does, under a directory named name: a gzipped tar, in
// sorted order and without times, so that the same files always give the same digest. Tools
// and tests that make charts in code hand the result to Load, or put it in a Release's ConfigMap.
func Package(name string, files map[string]string) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, path := range slices.Sorted(maps.Keys(files)) {
		content := files[path]
		if err := tw.WriteHeader(&tar.Header{Name: name + "/" + path, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			return nil, fmt.Errorf("packaging %s: %w", path, err)
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return nil, fmt.Errorf("packaging %s: %w", path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
