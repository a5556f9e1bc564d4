package main

import (
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

// said is a write's answer as Optikon gives it: an apiResponse with code, saying what was done.
func said(code int, format string, args ...any) response {
	return response{code: code, body: apiResponse{Code: strconv.Itoa(code), Message: fmt.Sprintf(format, args...)}}
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
