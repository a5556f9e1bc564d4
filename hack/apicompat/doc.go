// Command apicompat reads apidiff's list of incompatible changes on standard input and fails
// unless CHANGELOG.md's Unreleased section names each under Breaking. hack/verify-apidiff.sh runs
// it: an incompatible change to the exported API is allowed, in a v0 minor release, only when its
// users are told.
//
// apidiff names a change as "./multicluster.(*Fleet).Start"; the changelog names it as
// "multicluster.Fleet.Start" (the receiver's pointer and parentheses dropped).
package main
