package main

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
)

// CORS: a page of another origin (Optikon's UI, served apart from its API) may call the API when
// --cors-allowed-origin names that origin. The page holds no credentials of its own: it runs
// behind an authenticating reverse proxy that adds the caller's bearer token, or sends one the
// user gave it. An origin is named exactly (scheme, host, port); "*" is refused, since answers
// carry Access-Control-Allow-Credentials for a proxy that authenticates with its own cookie.

// corsMethods and corsHeaders are what a preflight may ask for: the API's methods, and the
// headers its callers send (the token; a JSON or multipart body's type).
const (
	corsMethods = "GET, POST, PUT, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type"
)

// allowOrigins lets pages of origins call the API from a browser. Each must be an origin
// (scheme://host[:port], nothing else): "*", "null" and URLs with a path are refused.
func (g *guard) allowOrigins(origins []string) error {
	g.origins = map[string]bool{}
	for _, o := range origins {
		u, err := url.Parse(o)
		switch {
		case o == "*" || o == "null":
			return fmt.Errorf("--cors-allowed-origin %q: name each origin the UI is served from (https://ui.example.com:30800); any origin, with credentials, is never allowed", o)
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil:
			return fmt.Errorf("--cors-allowed-origin %q: want an origin, scheme://host[:port], as a browser sends it in Origin", o)
		}
		g.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return nil
}

// originAllowed reports whether a page of origin may call the API.
func (g *guard) originAllowed(origin string) bool {
	return origin != "" && g.origins[strings.ToLower(origin)]
}

// cors answers preflights from allowed origins, before authentication (a browser sends no
// credentials with one), and marks answers to their requests as readable by them. A preflight
// from any other origin gets 403 and no CORS header: the browser then sends nothing.
func (g *guard) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.answerCORS(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// answerCORS marks the answer to a request from an allowed origin as readable by it, and answers
// a preflight; it reports whether it answered.
func (g *guard) answerCORS(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	allowed := g.originAllowed(origin)
	if allowed {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
		h.Add("Vary", "Origin")
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	if !allowed {
		encoderFor(r)(w, r, response{}, httpapi.StatusError(http.StatusForbidden, "Forbidden",
			fmt.Sprintf("a page of origin %q may not call this server: give --cors-allowed-origin to allow it", origin)))
		return true
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", corsMethods)
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}
