package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type things struct{}

var thingRoutes = []Route[things]{
	{Method: "GET", Path: "/things/{name}", Help: "one thing", Answer: func(_ things, r *http.Request) (Response, error) {
		if r.PathValue("name") == "missing" {
			return Response{}, apierrors.NewNotFound(schema.GroupResource{Resource: "things"}, "missing")
		}
		return OK(map[string]string{"name": r.PathValue("name")}), nil
	}},
	{Method: "DELETE", Path: "/things/{name}", Help: "remove it", Answer: func(things, *http.Request) (Response, error) {
		return Response{}, errors.New("not a Status")
	}},
}

// serve is the status and Status (or value) of one request to thingRoutes.
func serve(t *testing.T, method, path string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	h := WithStatusErrors(Mux(things{}, thingRoutes, EncodeNative), "things' API", thingRoutes, EncodeNative)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	return w, body
}

// A route's value and its typed error are written by the encoder; a path no route takes is a 404
// naming the routes, a method the path does not take a 405 with Allow; an untyped error is a
// 500 Status. All are JSON, none Go's plain text.
func TestRoutesAnswerThroughTheEncoder(t *testing.T) {
	w, body := serve(t, "GET", "/things/a")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "a", body["name"])

	w, body = serve(t, "GET", "/things/missing")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Equal(t, string(metav1.StatusReasonNotFound), body["reason"])

	w, body = serve(t, "GET", "/elsewhere")
	require.Equal(t, http.StatusNotFound, w.Code)
	require.Equal(t, "Status", body["kind"])
	require.Contains(t, body["message"], "things' API: /things/NAME")

	w, body = serve(t, "POST", "/things/a")
	require.Equal(t, http.StatusMethodNotAllowed, w.Code)
	require.Equal(t, "DELETE, GET, HEAD", w.Header().Get("Allow"))
	require.Contains(t, body["message"], "this route takes DELETE, GET, HEAD")

	w, body = serve(t, "DELETE", "/things/a")
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.Equal(t, string(metav1.StatusReasonInternalError), body["reason"])
}

// Help prints each route once, its help beside it.
func TestHelp(t *testing.T) {
	require.Equal(t, "  GET    /things/{name}                one thing\n  DELETE /things/{name}                remove it", Help(thingRoutes))
}
