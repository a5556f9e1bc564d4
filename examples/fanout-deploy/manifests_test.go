package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A YAML error names the line of the file, not of its document: the third document's bad line
// is line 9 of the file (it said line 3, counted from the document's start).
func TestYAMLErrorsNameTheFilesLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "app.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join([]string{
		"---", // 1: a leading separator starts no document
		"apiVersion: v1",
		"kind: ConfigMap",
		"metadata: {name: a}",
		"---",
		"---", // 6: an empty document is not counted, as the decoder does not count it
		"apiVersion: v1",
		"kind: ConfigMap",
		"metadata: {name: [b}", // 9
		"",
	}, "\n")), 0o600))
	_, err := readManifestFile(path)
	require.Error(t, err)
	require.Contains(t, err.Error(), path+", document 2: ")
	require.Contains(t, err.Error(), "yaml: line 9:")

	require.Equal(t, []int{2, 5}, yamlDocumentStarts([]byte("---\na: 1\n---\n---  \nb: 2\n")))
	require.Equal(t, []int{1}, yamlDocumentStarts([]byte("a: 1\n---\n")))
}
