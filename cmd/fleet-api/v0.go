package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Optikon's v0 API (its swagger, api/v0/gen/swagger.md of optikon/api): the contract its UI
// calls, on the SDK. It serves one cluster set, fleet-api's -n, for its caller as every other
// route does; its errors are Optikon's APIResponse.

// apiResponse is Optikon's answer for an error or a write: code is the HTTP status, as a string.
type apiResponse struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeAPIResponse writes an apiResponse with code.
func writeAPIResponse(w http.ResponseWriter, code int, message string) {
	writeJSON(w, code, apiResponse{Code: strconv.Itoa(code), Message: message})
}

// v0Errors answers every error of next (401, 403, 404, 415, the registry's own) as an
// apiResponse: the routes and the guard write Kubernetes Status objects, whose message it keeps.
func v0Errors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cw := &errorCapture{ResponseWriter: w}
		next.ServeHTTP(cw, r)
		if cw.code < http.StatusBadRequest {
			return
		}
		var st metav1.Status
		message := cw.body.String()
		if json.Unmarshal(cw.body.Bytes(), &st) == nil && st.Message != "" {
			message = st.Message
		}
		code := cw.code
		if code == http.StatusUnprocessableEntity {
			code = http.StatusBadRequest // the contract's word for an invalid body; the message names each field
		}
		writeAPIResponse(w, code, message)
	})
}

// errorCapture passes a success through and keeps an error's body for v0Errors to rewrite.
type errorCapture struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (c *errorCapture) WriteHeader(code int) {
	c.code = code
	if code < http.StatusBadRequest {
		c.ResponseWriter.WriteHeader(code)
	}
}

func (c *errorCapture) Write(b []byte) (int, error) {
	if c.code == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.code >= http.StatusBadRequest {
		return c.body.Write(b)
	}
	return c.ResponseWriter.Write(b)
}

// v0Set is the cluster set /v0 serves: --optikon-cluster-set, else fleet-api's one (-n); an
// error when it serves several and none was chosen, since Optikon names a cluster by its name
// alone.
func (s *server) v0Set() (string, error) {
	switch {
	case s.optikonSet != "":
		return s.optikonSet, nil
	case len(s.namespaces) == 1:
		return s.namespaces[0], nil
	case len(s.namespaces) == 0:
		return "", statusError(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"/v0 serves one cluster set, and this server serves every set (-A): run fleet-api with --optikon-cluster-set SET (the chart's fleetAPI.optikonClusterSet), or with -n SET, for Optikon's API")
	}
	return "", statusError(http.StatusBadRequest, metav1.StatusReasonBadRequest,
		fmt.Sprintf("/v0 serves one cluster set and this server serves %d: run fleet-api with --optikon-cluster-set SET, or with -n SET, for Optikon's API", len(s.namespaces)))
}
