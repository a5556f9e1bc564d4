// Package buildinfo says which build of the SDK a program is: the SDK module's version (a
// release tag, a pseudo-version, or "(devel)" for a build from a checkout), the commit, the Go
// version and the platform, as the Go toolchain recorded them in the binary. A tool that vendors
// the SDK reports the SDK version it was built with: `clusterregistry version` and
// `fanout-deploy --version` print it.
package buildinfo
