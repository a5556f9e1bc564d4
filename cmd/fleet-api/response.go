package main

import "net/http"

// response is what a route answers: a value and its status code. A route returns it, or an
// error, and its API's encoder writes either, once: the native API's writes the value as JSON
// and an error as a Kubernetes Status (the registry's own errors with their code and reason).
type response struct {
	code int
	body any
}

// answer is a route that returns its answer rather than writing it.
type answer func(*server, *http.Request) (response, error)

// ok is a 200 answer of body.
func ok(body any) response { return response{code: http.StatusOK, body: body} }

// encoder writes a route's answer, or its error, in the form of one API.
type encoder func(w http.ResponseWriter, resp response, err error)

// encodeNative is the native API's encoder.
func encodeNative(w http.ResponseWriter, resp response, err error) {
	if err != nil {
		writeStatus(w, err)
		return
	}
	writeJSON(w, resp.code, resp.body)
}
