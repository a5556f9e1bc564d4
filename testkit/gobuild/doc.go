// Package gobuild builds the module's commands for tests that run them as programs (the
// clusterregistry command, fanout-deploy), once per checkout rather than once per test binary.
//
// A test binary that builds a command into a directory of its own links it again every run: the
// clusterregistry command is some 90 MB, about 10 s of a core to link, and CI builds it in five
// test binaries (the race pass and both version-skew passes). Built into one directory per
// checkout, `go build` finds the binary up to date (its build ID matches the sources and flags)
// and links nothing, in well under a second.
package gobuild
