package main

import (
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// response is what a route answers: a value and its status code, or an answer kept encoded
// (kept: it serves itself, with its ETag, 304 and gzip). A route returns it, or an error, and
// its API's encoder writes either, once.
type response struct {
	code int
	body any
	kept http.Handler
}

// answer is a route that returns its answer rather than writing it.
type answer func(*server, *http.Request) (response, error)

// ok is a 200 answer of body.
func ok(body any) response { return response{code: http.StatusOK, body: body} }

// encoder writes a route's answer to r, or its error, in the form of one API. The guard's and
// the mux's refusals (401, 403, 404, 405, 415) are written by the encoder of the API they refuse.
type encoder func(w http.ResponseWriter, r *http.Request, resp response, err error)

// encodeNative is the native API's encoder: the value as JSON, an error as a Kubernetes Status.
func encodeNative(w http.ResponseWriter, r *http.Request, resp response, err error) {
	if err != nil {
		writeStatus(w, err)
		return
	}
	writeAnswer(w, r, resp)
}

// encodeV0 is Optikon's API's encoder: the value as JSON, an error as Optikon's apiResponse with
// the error's code and message (the registry's errors with theirs; 422, an invalid body, as the
// contract's 400, the message naming each field).
func encodeV0(w http.ResponseWriter, r *http.Request, resp response, err error) {
	if err != nil {
		st := statusOf(err)
		code := int(st.Code)
		if code == http.StatusUnprocessableEntity {
			code = http.StatusBadRequest
		}
		writeAPIResponse(w, code, st.Message)
		return
	}
	writeAnswer(w, r, resp)
}

func writeAnswer(w http.ResponseWriter, r *http.Request, resp response) {
	if resp.kept != nil {
		resp.kept.ServeHTTP(w, r)
		return
	}
	writeJSON(w, resp.code, resp.body)
}

// statusOf is err as a Kubernetes Status, as an API server would write it: the registry's own
// errors with their code and reason, any other as an internal error.
func statusOf(err error) metav1.Status {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	return st
}
