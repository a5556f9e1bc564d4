// Package rotation renews members' service-account tokens before they expire, and revokes the
// ones it replaces. join stores each member's token in a Secret of the registry annotated with the
// service account it belongs to (v1alpha1.ServiceAccountAnnotation), gives that account a
// namespace of its own on the member, and lets it ask for tokens of itself and manage the Secrets
// of that namespace, and nothing else (Rules). Tokens are bound to such Secrets (Issue); deleting
// one revokes its token (Revoke).
//
// A Rotator asks the member, with the current token and pinned to the member's server as the
// Cluster resolves, for a new token once RenewAt (two thirds) of the current one's life has
// passed; writes it and its expiry (v1alpha1.TokenExpiresAnnotation) into the same Secret,
// pinning and CA kept; and then revokes the token it replaced. Tools that reach members through a
// multicluster.Member use the new token at their next request, and send a request refused because
// the old one was just revoked once more with the new one.
//
// Options.LeaderElection (election.Run) is for a Rotator run on its own, as `clusterregistry
// rotate --leader-elect` runs it; hosted in a controller-runtime Manager (package controllers),
// the Manager elects, and LeaderElection stays nil.
package rotation
