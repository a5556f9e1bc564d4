// Package httpapi is how fleet-api's APIs answer: a route is declared once (the mux serves it,
// --help prints it, a request no route takes is answered from the list), returns a Response or
// an error, and its API's one Encoder writes either. Both of fleet-api's APIs, the native one
// (Kubernetes Status errors) and Optikon's /v0 (package optikon, its APIResponse), are served
// with it. The model is controller-runtime's admission http.go: decode once, handle, encode once.
package httpapi
