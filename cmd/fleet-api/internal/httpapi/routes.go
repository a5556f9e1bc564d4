package httpapi

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Route is one route of an API served by S, declared once: the mux serves it, --help prints it,
// and a request no route takes is answered from the list (404 naming the routes, 405 naming the
// methods the path takes).
type Route[S any] struct {
	Method, Path string
	// Query is what the route needs in its query, for --help ("?namespace=NS"); the mux matches
	// the path alone.
	Query string
	// Answer returns what the route answers, which its API's encoder writes.
	Answer func(S, *http.Request) (Response, error)
	// Help is what --help prints beside the route, in lines of at most 60 characters.
	Help string
}

// Pattern is the route as Go's mux takes it.
func (r Route[S]) Pattern() string { return r.Method + " " + r.Path }

// Mux serves routes from s, their answers written by encode.
func Mux[S any](s S, routes []Route[S], encode Encoder) *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.HandleFunc(r.Pattern(), func(w http.ResponseWriter, req *http.Request) {
			resp, err := r.Answer(s, req)
			encode(w, req, resp, err)
		})
	}
	return mux
}

// Help is routes as --help prints them: the method, the path, and the help beside it.
func Help[S any](routes []Route[S]) string {
	var b strings.Builder
	const pathWidth = 30
	for _, r := range routes {
		path := r.Path + r.Query
		fmt.Fprintf(&b, "  %-6s %s", r.Method, path)
		lines := strings.Split(r.Help, "\n")
		if len(path) >= pathWidth {
			b.WriteString("\n" + strings.Repeat(" ", 9+pathWidth))
		} else {
			b.WriteString(strings.Repeat(" ", pathWidth-len(path)))
		}
		b.WriteString(strings.Join(lines, "\n"+strings.Repeat(" ", 9+pathWidth)) + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// placeholder is a path's {wildcard}, which a 404 names in capitals.
var placeholder = regexp.MustCompile(`\{(\w+)\}`)

// Paths are the paths of routes, each once, as a 404 names them.
func Paths[S any](routes []Route[S]) string {
	var paths []string
	for _, r := range routes {
		p := placeholder.ReplaceAllStringFunc(r.Path, func(w string) string { return strings.ToUpper(w[1 : len(w)-1]) })
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return strings.Join(paths, ", ")
}

// WithStatusErrors answers a request that no route of mux takes as the registry would, with a
// Status that encode writes: 405 (with Allow) for a method the path's routes do not take, found
// by asking the mux for the path with each method the routes use, else 404 naming the routes of
// api (the API's name). Go's mux would answer both in plain text.
func WithStatusErrors[S any](mux *http.ServeMux, api string, routes []Route[S], encode Encoder) http.Handler {
	methods := []string{http.MethodHead}
	for _, r := range routes {
		if !slices.Contains(methods, r.Method) {
			methods = append(methods, r.Method)
		}
	}
	slices.Sort(methods)
	paths := api + ": " + Paths(routes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r) // the mux, not the handler alone: it sets the route's path values
			return
		}
		var allow []string
		for _, m := range methods {
			probe := r.Clone(r.Context())
			probe.Method = m
			if _, pattern := mux.Handler(probe); pattern != "" {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 {
			w.Header().Set("Allow", strings.Join(allow, ", "))
			encode(w, r, Response{}, StatusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
				fmt.Sprintf("%s %s: this route takes %s", r.Method, r.URL.Path, strings.Join(allow, ", "))))
			return
		}
		encode(w, r, Response{}, StatusError(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("%s is not a route of this server (%s; fleet-api --help lists them)", r.URL.Path, paths)))
	})
}
