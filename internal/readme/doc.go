// Package readme holds the tests that keep README.md true: its Go snippets compile as written,
// and its shell steps for installing the CRD without Go work on a fresh registry.
package readme
