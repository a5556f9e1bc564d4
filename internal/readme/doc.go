// Package readme holds the tests that keep README.md and the pages of docs/ true: their Go
// snippets compile as written, and their shell steps (installing the CRD without Go, registering
// clusters) work as written on a fresh registry.
package readme
