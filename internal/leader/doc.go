// Package leader runs a function only while this replica holds a Lease: the health controller
// and the credential rotator use it so that replicas take turns instead of acting at once.
package leader
