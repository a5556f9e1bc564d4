// Package rotation renews members' service-account tokens before they expire. join stores each
// member's token in a Secret of the registry annotated with the service account it belongs to
// (v1alpha1.ServiceAccountAnnotation) and grants that account the right to ask for tokens of
// itself, and nothing else; a Rotator asks the member, with the current token and through the
// member's pinned transport, for a new one once two thirds of the current one's life have passed,
// and writes it into the same Secret (pinning and CA kept), with its expiry
// (v1alpha1.TokenExpiresAnnotation). Tools that read the Secret through a Resolver use the new
// token at their next request.
package rotation
