// Package boundtoken is the protocol by which the SDK gives a member's service account tokens it
// can revoke: each token bound to a Secret of its own on the member, revoked by deleting that
// Secret. join issues the first token with it, and the rotator renews and revokes with it; a tool
// that registers members itself uses it the same way.
package boundtoken
