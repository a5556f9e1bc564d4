// Package fleetmain runs a package's tests beside a local fleet: Main is the TestMain of every
// package with integration tests, and Integration marks each such test. It imports localfleet
// and realservers alone of the module, so that the tests of any package may use it, access and
// multicluster among them (testkit/fleettest, with more helpers, imports both).
package fleetmain
