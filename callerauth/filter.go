package callerauth

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Filter guards a non-resource endpoint, such as /metrics, as kube-apiserver guards its own: 401
// for a caller it cannot authenticate, 403 for one the registry does not allow the request's verb
// on the path (nonResourceURLs), and the handler for the rest. It is a controller-runtime metrics
// Filter.
func (c *Checker) Filter(log logr.Logger, next http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, ok, err := c.Authenticator.AuthenticateRequest(r)
		if err != nil || !ok {
			if err != nil {
				log.V(4).Info("a caller was not authenticated", "error", err.Error())
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attributes := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
		decision, reason, err := c.Authorizer.Authorize(r.Context(), attributes)
		if err != nil {
			log.Error(err, "asking the registry whether a caller may read", "user", res.User.GetName(), "path", r.URL.Path)
			http.Error(w, "the registry could not be asked whether you may do this", http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			log.V(4).Info("a caller was refused", "user", res.User.GetName(), "path", r.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", res.User.GetName(), attributes.Verb, r.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}

var _ metricsserver.Filter = (*Checker)(nil).Filter
