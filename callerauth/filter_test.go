package callerauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The filter lets through only a caller the authenticator knows and the authorizer allows the
// request's verb on its path: 401 for nobody, 403 for a caller not allowed, naming them.
func TestFilter(t *testing.T) {
	c := &Checker{
		Authenticator: authenticator.RequestFunc(func(r *http.Request) (*authenticator.Response, bool, error) {
			if name := r.Header.Get("X-Test-User"); name != "" {
				return &authenticator.Response{User: &user.DefaultInfo{Name: name}}, true, nil
			}
			return nil, false, nil
		}),
		Authorizer: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			if a.GetUser().GetName() == "scraper" && a.GetVerb() == "get" && a.GetPath() == "/metrics" {
				return authorizer.DecisionAllow, "", nil
			}
			return authorizer.DecisionNoOpinion, "no rule", nil
		}),
	}
	h, err := c.Filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	require.NoError(t, err)
	for _, tc := range []struct {
		user, method string
		code         int
	}{
		{"", http.MethodGet, http.StatusUnauthorized},
		{"nosy", http.MethodGet, http.StatusForbidden},
		{"scraper", http.MethodPost, http.StatusForbidden},
		{"scraper", http.MethodGet, http.StatusOK},
	} {
		r := httptest.NewRequest(tc.method, "/metrics", nil)
		if tc.user != "" {
			r.Header.Set("X-Test-User", tc.user)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		require.Equal(t, tc.code, w.Code, "%s %s", tc.user, tc.method)
		if tc.code == http.StatusForbidden {
			require.Contains(t, w.Body.String(), `user "`+tc.user+`"`)
		}
	}
}
