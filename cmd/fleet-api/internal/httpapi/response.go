package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Response is what a route answers: a value and its status code, or an answer that serves
// itself (Kept: one kept encoded, with its ETag, 304 and gzip, or a watch's stream, whose
// errors before it starts are the route's). A route returns it, or an error, and its API's
// encoder writes either, once.
type Response struct {
	Code int
	Body any
	Kept http.Handler
}

// OK is a 200 answer of body.
func OK(body any) Response { return Response{Code: http.StatusOK, Body: body} }

// Encoder writes a route's answer to r, or its error, in the form of one API. The guard's and
// the mux's refusals (401, 403, 404, 405, 415) are written by the encoder of the API they refuse.
type Encoder func(w http.ResponseWriter, r *http.Request, resp Response, err error)

// EncodeNative is the native API's encoder: the value as JSON, an error as a Kubernetes Status.
func EncodeNative(w http.ResponseWriter, r *http.Request, resp Response, err error) {
	if err != nil {
		WriteStatus(w, err)
		return
	}
	WriteAnswer(w, r, resp)
}

// WriteAnswer writes a Response: a kept answer serves itself, any other is its body as JSON.
func WriteAnswer(w http.ResponseWriter, r *http.Request, resp Response) {
	if resp.Kept != nil {
		resp.Kept.ServeHTTP(w, r)
		return
	}
	WriteJSON(w, resp.Code, resp.Body)
}

// StatusOf is err as a Kubernetes Status, as an API server would write it: the registry's own
// errors with their code and reason, any other as an internal error.
func StatusOf(err error) metav1.Status {
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

// StatusError is an error that WriteStatus answers with code, reason and message as they are.
func StatusError(code int, reason metav1.StatusReason, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message}}
}

// WriteStatus writes err as a Kubernetes Status (StatusOf), as an API server would.
func WriteStatus(w http.ResponseWriter, err error) {
	st := StatusOf(err)
	WriteJSON(w, int(st.Code), &st)
}

// WriteJSON writes v, indented, with code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
