package main

import "github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"

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
