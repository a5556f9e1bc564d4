// Package consumer holds a test that depends on the SDK from outside it, as a multi-cluster tool
// does: a module of its own that vendors the SDK and builds with -mod=vendor. It checks that the
// build works and that nothing only the SDK's own tests or code generation need comes along.
package consumer
