// Package realservers is the one place a test says it needs real API servers: Required skips it
// under -short, naming what it needs and how to get it, so that `go test -short ./...` runs the
// unit tests alone. It imports nothing of the module, so that any package's tests may use it,
// access and multicluster among them.
package realservers
