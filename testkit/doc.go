// Package testkit is the SDK's own test kit, apart from what the library runs: the packages
// below it serve the SDK's tests and benchmarks, and import the high-level packages they test.
//
//   - fleetmain: every package's TestMain beside a local fleet, Integration for each test that
//     needs it, and a namespace of a test's own; it imports localfleet and realservers alone, so
//     that access and multicluster use it too.
//   - fleettest: cluster sets of a test's own on top of localfleet, fixed member sets, and a
//     hostile member that redirects.
//   - realservers: the one place a test says it needs real API servers (skipped under -short).
//   - simmembers: simulated member API servers (TLS on 127.x.y.z, injected latency) for the
//     scale benchmarks that hundreds of real API servers do not fit on a small machine.
//   - testcerts: certificates for tests' TLS servers.
//   - consumer: a test that depends on the SDK from outside it, as a tool does.
//
// They are importable, so that a tool's benchmarks may borrow the simulated members, but carry no
// compatibility promise: hack/verify-apidiff.sh does not check them. The supported test kit for
// tools is package localfleet. Nothing the library runs imports testkit; internal/ holds only
// what it runs.
package testkit
