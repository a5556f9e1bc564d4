// Package callerauth authenticates and authorizes the callers of the servers the SDK ships (the
// controllers' metrics endpoint, fleet-api) as the registry's own API server would: a bearer
// token the registry's TokenReview accepts, or a client certificate signed by the CAs the
// registry trusts for its own x509 authentication; then a SubjectAccessReview for what the
// request asks. Nothing ambient counts: no address, cookie or origin.
package callerauth
