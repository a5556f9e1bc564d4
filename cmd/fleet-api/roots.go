package main

// fleet-api's image (hack/image --command ./cmd/fleet-api) is the binary on an empty base:
// no CA certificates. Go's own copy of the Mozilla roots, linked in, verifies there the public
// HTTPS and OCI chart repositories that chart releases name; it is used only where the system
// has no roots of its own, so a host's (or a mounted) CA bundle still wins, as SSL_CERT_FILE and
// SSL_CERT_DIR say.
import _ "golang.org/x/crypto/x509roots/fallback"
