package optikon

import "github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"

// Routes are Optikon's v0 API, under /v0, declared once: the mux serves them, fleet-api's --help
// prints them (httpapi.Help), and a request none takes is answered from the list.
var Routes = []httpapi.Route[*API]{
	{Method: "GET", Path: "/v0/clusters", Answer: (*API).listClusters,
		Help: "the set's Clusters, each with annotations NumPods and\nHealth (Green, Yellow, Red) computed from the caches"},
	{Method: "POST", Path: "/v0/clusters", Answer: (*API).createCluster,
		Help: "body: a Cluster as JSON (201); NumPods and Health are\nnever stored, other annotations (Lat, Long) are"},
	{Method: "GET", Path: "/v0/clusters/{clusterId}", Answer: (*API).getCluster,
		Help: "one Cluster, annotated as in the list (404 if none)"},
	{Method: "PUT", Path: "/v0/clusters/{clusterId}", Answer: (*API).updateCluster,
		Help: "body: the whole Cluster, replacing it (200)"},
	{Method: "DELETE", Path: "/v0/clusters/{clusterId}", Answer: (*API).deleteCluster,
		Help: "remove it from the registry (200)"},
	{Method: "GET", Path: "/v0/releases", Answer: (*API).listReleases,
		Help: "each Helm-mode Release of the set, once per cluster\n?labels=K=V,K=V selects that Helm reports it on: Name,\nNamespace, Version (its revision there), OnCluster, Chart,\nInfo.Status.Code (Helm 2's words), Config (the Release's\nown values); from caches"},
	{Method: "POST", Path: "/v0/releases", Answer: (*API).createRelease,
		Help: "multipart/form-data: chartTar (a packaged chart, at most\n768 KiB), name, namespace: installed by Helm on every\ncluster ?labels= selects, every cluster without (201)"},
	{Method: "GET", Path: "/v0/releases/{releaseId}", Answer: (*API).getRelease,
		Help: "the release on the first cluster ?labels= selects"},
	{Method: "PUT", Path: "/v0/releases/{releaseId}", Answer: (*API).updateRelease,
		Help: "multipart/form-data: chartTar: upgraded where it is (200)"},
	{Method: "DELETE", Path: "/v0/releases/{releaseId}", Answer: (*API).deleteRelease,
		Help: "removed from the clusters ?labels= selects, or every one (200)"},
}
