package main

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// route is one route of fleet-api, declared once: the mux serves it, --help prints it, and a
// request no route takes is answered from the list (404 naming the routes, 405 naming the
// methods the path takes). doc.go names them too, which a test holds to this list.
type route struct {
	method, path string
	// query is what the route needs in its query, for --help ("?namespace=NS"); the mux matches
	// the path alone.
	query string
	// answer returns what the route answers, which its API's encoder writes; serve, for the
	// routes that stream or write their answers themselves, writes it.
	answer answer
	serve  func(*server, http.ResponseWriter, *http.Request)
	// help is what --help prints beside the route, in lines of at most 60 characters.
	help string
}

// pattern is the route as Go's mux takes it.
func (r route) pattern() string { return r.method + " " + r.path }

// apiRoutes are fleet-api's own API.
var apiRoutes = []route{
	{method: "GET", path: "/clusters", answer: (*server).listClusters,
		help: "every member the caller may list, with Ready, version,\nnode and Deployment counts (unknown, with why, when the\ncaches could not get them) and how current the caches are\n(?labelSelector= and ?fieldSelector= of metadata.name\nand metadata.namespace choose, as the registry's would)"},
	{method: "GET", path: "/watch/clusters", serve: (*server).watchClusters,
		help: "the same, then each change, one JSON event a line\n(?resourceVersion=N resumes; 410 when no longer kept;\na member entering or leaving a selection is ADDED or\nDELETED; nothing is sent while nothing changes)"},
	{method: "GET", path: "/watch/clusters/{namespace}/{name}", serve: (*server).watchCluster,
		help: "one member's stream (RBAC: watch on that Cluster)"},
	{method: "GET", path: "/clusters/{namespace}/{name}", answer: (*server).getCluster,
		help: "one member, with its Nodes and Deployments"},
	{method: "POST", path: "/clusters", answer: (*server).createCluster,
		help: "body: a Cluster as JSON, metadata.namespace set (201)"},
	{method: "PUT", path: "/clusters/{namespace}/{name}", answer: (*server).updateCluster,
		help: "body: the whole Cluster as JSON, replacing it (200)"},
	{method: "PATCH", path: "/clusters/{namespace}/{name}", answer: (*server).patchCluster,
		help: "body: a JSON merge patch, sent as\napplication/merge-patch+json or application/json (200)"},
	{method: "DELETE", path: "/clusters/{namespace}/{name}", answer: (*server).deleteCluster,
		help: "no body (200, a Status)"},
	{method: "DELETE", path: "/clusters", query: "?namespace=NS", answer: (*server).deleteClusters,
		help: "the set's Clusters that ?labelSelector= and ?fieldSelector=\nchoose, every one without them (RBAC: deletecollection);\nanswers the ClusterList of what was deleted"},
	{method: "GET", path: "/releases", answer: (*server).listReleasesRoute,
		help: "every Release of the sets where the caller may list them:\nits source (manifests, a ConfigMap, a chart and its mode),\nconditions, each member's phase (?namespace=NS for one set);\nnotPermitted names the sets you may not list, and why"},
	{method: "GET", path: "/watch/releases", serve: (*server).watchReleasesRoute,
		help: "GET /releases, then each change, one JSON event a line"},
	{method: "GET", path: "/releases/{namespace}/{name}/rollout", answer: (*server).getRollout,
		help: "where its rollout stands: waves in order, each member's\nphase, revisions by number, the actions you may take"},
	{method: "POST", path: "/releases/{namespace}/{name}/{action}", answer: (*server).act,
		help: "approve ({\"wave\": N}, 0 the next), pause, resume, restart,\nundo ({\"toRevision\": N}, 0 the previous): as\nclusterregistry rollout does it, as you (RBAC: update\nreleases); 400 for a wave or revision it does not have,\n409 when its state refuses (already paused)"},
	{method: "GET", path: "/charts", answer: (*server).listCharts,
		help: "the chart releases of the sets where the caller may list\nReleases: chart, version and digest delivered, conditions,\neach member's phase (?namespace=NS for one set)"},
	{method: "GET", path: "/charts/{namespace}/{name}", answer: (*server).getChart,
		help: "one chart release"},
	{method: "POST", path: "/charts", answer: (*server).createChart,
		help: "body: {namespace, name, placement, targetNamespace, chart:\n{url, chart, version, digest, secretRef} or {configMap} or\n{secret}, and mode (Render, the default, or Helm), values,\nvaluesFrom, memberValues}: a Release, created as the caller (201)"},
	{method: "PUT", path: "/charts/{namespace}/{name}", answer: (*server).updateChart,
		help: "the same body, replacing chart, values, member values (200)"},
	{method: "PATCH", path: "/charts/{namespace}/{name}", answer: (*server).updateChart,
		help: "body: {\"version\": \"1.3.0\", \"values\": {...}}, either (200)"},
	{method: "DELETE", path: "/charts/{namespace}/{name}", answer: (*server).deleteChart,
		help: "no body (200, a Status); its objects leave the members"},
	{method: "GET", path: "/watch/charts", serve: (*server).watchChartsRoute,
		help: "GET /charts, then each change, one JSON event a line, as\n/watch/clusters streams (nothing while nothing changes)"},
}

// v0Routes are Optikon's v0 API, under /v0.
var v0Routes = []route{
	{method: "GET", path: "/v0/clusters", answer: (*server).v0ListClusters,
		help: "the set's Clusters, each with annotations NumPods and\nHealth (Green, Yellow, Red) computed from the caches"},
	{method: "POST", path: "/v0/clusters", answer: (*server).v0CreateCluster,
		help: "body: a Cluster as JSON (201); NumPods and Health are\nnever stored, other annotations (Lat, Long) are"},
	{method: "GET", path: "/v0/clusters/{clusterId}", answer: (*server).v0GetCluster,
		help: "one Cluster, annotated as in the list (404 if none)"},
	{method: "PUT", path: "/v0/clusters/{clusterId}", answer: (*server).v0UpdateCluster,
		help: "body: the whole Cluster, replacing it (200)"},
	{method: "DELETE", path: "/v0/clusters/{clusterId}", answer: (*server).v0DeleteCluster,
		help: "remove it from the registry (200)"},
	{method: "GET", path: "/v0/releases", answer: (*server).v0ListReleases,
		help: "each Helm-mode Release of the set, once per cluster\n?labels=K=V,K=V selects that Helm reports it on: Name,\nNamespace, Version (its revision there), OnCluster, Chart,\nInfo.Status.Code (Helm 2's words), Config (the Release's\nown values); from caches"},
	{method: "POST", path: "/v0/releases", answer: (*server).v0CreateRelease,
		help: "multipart/form-data: chartTar (a packaged chart, at most\n768 KiB), name, namespace: installed by Helm on every\ncluster ?labels= selects, every cluster without (201)"},
	{method: "GET", path: "/v0/releases/{releaseId}", answer: (*server).v0GetRelease,
		help: "the release on the first cluster ?labels= selects"},
	{method: "PUT", path: "/v0/releases/{releaseId}", answer: (*server).v0UpdateRelease,
		help: "multipart/form-data: chartTar: upgraded where it is (200)"},
	{method: "DELETE", path: "/v0/releases/{releaseId}", answer: (*server).v0DeleteRelease,
		help: "removed from the clusters ?labels= selects, or every one (200)"},
}

// mux serves routes from s, their answers written by encode.
func (s *server) mux(routes []route, encode encoder) *http.ServeMux {
	mux := http.NewServeMux()
	for _, r := range routes {
		if r.answer != nil {
			mux.HandleFunc(r.pattern(), func(w http.ResponseWriter, req *http.Request) {
				resp, err := r.answer(s, req)
				encode(w, req, resp, err)
			})
			continue
		}
		mux.HandleFunc(r.pattern(), func(w http.ResponseWriter, req *http.Request) { r.serve(s, w, req) })
	}
	return mux
}

// routeHelp is routes as --help prints them: the method, the path, and the help beside it.
func routeHelp(routes []route) string {
	var b strings.Builder
	const pathWidth = 30
	for _, r := range routes {
		path := r.path + r.query
		fmt.Fprintf(&b, "  %-6s %s", r.method, path)
		lines := strings.Split(r.help, "\n")
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

// routePaths are the paths of routes, each once, as a 404 names them.
func routePaths(routes []route) string {
	var paths []string
	for _, r := range routes {
		p := placeholder.ReplaceAllStringFunc(r.path, func(w string) string { return strings.ToUpper(w[1 : len(w)-1]) })
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return strings.Join(paths, ", ")
}

// withStatusErrors answers a request that no route of mux takes as the registry would, with a
// Status: 405 (with Allow) for a method the path's routes do not take, found by asking the mux
// for the path with each method the routes use, else 404 naming the routes of api (the API's
// name). Go's mux would answer both in plain text.
func withStatusErrors(mux *http.ServeMux, api string, routes []route, encode encoder) http.Handler {
	methods := []string{http.MethodHead}
	for _, r := range routes {
		if !slices.Contains(methods, r.method) {
			methods = append(methods, r.method)
		}
	}
	slices.Sort(methods)
	paths := api + ": " + routePaths(routes)
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
			encode(w, r, response{}, statusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
				fmt.Sprintf("%s %s: this route takes %s", r.Method, r.URL.Path, strings.Join(allow, ", "))))
			return
		}
		encode(w, r, response{}, statusError(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("%s is not a route of this server (%s; fleet-api --help lists them)", r.URL.Path, paths)))
	})
}
