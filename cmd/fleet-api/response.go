package main

import (
	"net/http"
	"strings"

	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
)

// The native API's routes return values that its one encoder (httpapi.EncodeNative) writes;
// Optikon's /v0 is served the same way by package optikon, with its own encoder.

type (
	// response is what a native route answers (httpapi.Response).
	response = httpapi.Response
	// route is a route of the native API, served by the server.
	route = httpapi.Route[*server]
)

// ok is a 200 answer of body.
func ok(body any) response { return httpapi.OK(body) }

// encoderFor is the encoder of the API r asks, for the refusals made in front of both (a host
// this server does not serve, a preflight of an origin it does not allow): Optikon's under
// /v0, the native one elsewhere.
func encoderFor(r *http.Request) httpapi.Encoder {
	if r.URL.Path == "/v0" || strings.HasPrefix(r.URL.Path, "/v0/") {
		return optikon.Encode
	}
	return httpapi.EncodeNative
}
