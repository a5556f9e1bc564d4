package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	clusterregistryv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/internal/answercache"
	"github.com/cluster-registry/sdk/multicluster"
)

// server answers the API from a Fleet and two kinds of caches on its members, for callers whom
// its guard authenticates and within what the registry lets each do.
type server struct {
	guard      *guard
	fleet      *multicluster.Fleet
	namespaces []string // the cluster sets served; every one when empty
	// optikonSet is the cluster set /v0 serves (--optikon-cluster-set); the one of namespaces
	// when empty.
	optikonSet  string
	caches      *fleetcache.Cache
	nodes       *fleetcache.Kind[*corev1.Node]
	deployments *fleetcache.Kind[*appsv1.Deployment]
	pods        *fleetcache.Kind[*corev1.Pod]
	// helm is every member's Helm storage (its releases' records, summarized): GET /v0/releases.
	helm *fleetcache.Kind[*corev1.Secret]
	// feed numbers the changes to the members' summaries for GET /watch/clusters.
	feed *feed[clusterSummary]
	// charts follows the registry's Releases for GET /watch/charts.
	charts   *chartWatch
	stopFeed context.CancelFunc
	feedDone chan struct{}
	// changes counts the changes on the registry's side that the lists read (followChanges);
	// answers keeps the lists UIs poll, encoded, while nothing they read changed.
	changes       atomic.Uint64
	answers       *answercache.Cache[inputs]
	stopFollowing func()
}

// feedInterval is how often the feed compares the members' summaries: how late, at most, a
// change reaches a watcher.
const feedInterval = 500 * time.Millisecond

// summarizeAll is every member's summary now.
func (s *server) summarizeAll() map[types.NamespacedName]clusterSummary {
	out := map[types.NamespacedName]clusterSummary{}
	for _, m := range s.fleet.Members() {
		summary, _, _ := s.summarize(m)
		out[m.Name()] = summary
	}
	return out
}

// cacheKinds registers the kinds the API reads from every member's caches, keeping only what it
// shows: a Node's images and a Deployment's pod template are most of their size, and nothing
// here reads them.
func (s *server) cacheKinds() error {
	var err error
	s.nodes, err = fleetcache.Typed[*corev1.Node](s.caches, corev1.SchemeGroupVersion.WithResource("nodes"), fleetcache.KindOptions{
		Transform: func(obj any) (any, error) {
			if n, ok := obj.(*corev1.Node); ok {
				n.Status.Images = nil
			}
			return obj, nil
		},
	})
	if err != nil {
		return err
	}
	s.deployments, err = fleetcache.Typed[*appsv1.Deployment](s.caches, appsv1.SchemeGroupVersion.WithResource("deployments"), fleetcache.KindOptions{
		Transform: func(obj any) (any, error) {
			if d, ok := obj.(*appsv1.Deployment); ok {
				d.Spec.Template = corev1.PodTemplateSpec{}
			}
			return obj, nil
		},
	})
	if err != nil {
		return err
	}
	// Of a Pod, its phase and conditions: whether it runs, and is Ready.
	s.pods, err = fleetcache.Typed[*corev1.Pod](s.caches, corev1.SchemeGroupVersion.WithResource("pods"), fleetcache.KindOptions{
		Transform: func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				p.Spec, p.ManagedFields = corev1.PodSpec{}, nil
				p.Status = corev1.PodStatus{Phase: p.Status.Phase, Conditions: p.Status.Conditions}
			}
			return obj, nil
		},
	})
	if err != nil {
		return err
	}
	s.helm, err = fleetcache.Typed[*corev1.Secret](s.caches, corev1.SchemeGroupVersion.WithResource("secrets"), fleetcache.KindOptions{
		LabelSelector: helmStorageSelector, Transform: summarizeHelmSecret})
	if err != nil {
		return err
	}
	return nil
}

// startServer follows the registry's Clusters in namespaces (all when empty) and caches every
// member's Nodes and Deployments. Stop it with stop.
func startServer(ctx context.Context, registry versioned.Interface, resolver *access.Resolver, namespaces []string) (*server, error) {
	s := &server{namespaces: namespaces}
	s.fleet = multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: namespaces})
	if err := s.fleet.Start(ctx); err != nil {
		return nil, fmt.Errorf("following the registry: %w", err)
	}
	s.caches = fleetcache.New(s.fleet)
	if err := s.cacheKinds(); err != nil {
		s.fleet.Stop()
		return nil, err
	}
	if err := s.caches.Start(ctx); err != nil {
		s.fleet.Stop()
		return nil, err
	}
	s.feed = newFeed(4096)
	feedCtx, stopFeed := context.WithCancel(ctx)
	var err error
	if s.charts, err = watchCharts(feedCtx, registry, namespaces); err != nil {
		stopFeed()
		s.caches.Stop()
		s.fleet.Stop()
		return nil, err
	}
	s.answers = answercache.New[inputs](keptAnswers, keptAnswerBytes)
	if s.stopFollowing, err = s.followChanges(); err != nil {
		stopFeed()
		s.charts.stop()
		s.caches.Stop()
		s.fleet.Stop()
		return nil, err
	}
	s.stopFeed, s.feedDone = stopFeed, make(chan struct{})
	go func() {
		defer close(s.feedDone)
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.charts.feed.poll(feedCtx, feedInterval, s.charts.summarizeAll)
		}()
		s.feed.pollChanges(feedCtx, feedInterval, s.inputs, s.summarizeAll)
		<-done
	}()
	return s, nil
}

func (s *server) stop() {
	s.stopFollowing()
	s.stopFeed()
	<-s.feedDone
	s.charts.stop()
	s.caches.Stop()
	s.fleet.Stop()
}

// routes are the API, every route behind the guard g, and the dashboard page, which holds
// nothing of the fleet and asks the API as its user, with their token.
func (s *server) routes(g *guard) http.Handler {
	s.guard = g
	api := http.NewServeMux()
	api.HandleFunc("GET /clusters", s.listClusters)
	api.HandleFunc("GET /watch/clusters", s.watchClusters)
	api.HandleFunc("GET /watch/clusters/{namespace}/{name}", s.watchCluster)
	api.HandleFunc("GET /clusters/{namespace}/{name}", s.getCluster)
	api.HandleFunc("POST /clusters", s.createCluster)
	api.HandleFunc("DELETE /clusters", s.deleteClusters)
	api.HandleFunc("PUT /clusters/{namespace}/{name}", s.updateCluster)
	api.HandleFunc("PATCH /clusters/{namespace}/{name}", s.patchCluster)
	api.HandleFunc("DELETE /clusters/{namespace}/{name}", s.deleteCluster)
	api.HandleFunc("GET /releases", s.listReleasesRoute)
	api.HandleFunc("GET /watch/releases", s.watchReleasesRoute)
	api.HandleFunc("GET /releases/{namespace}/{name}/rollout", s.getRollout)
	api.HandleFunc("POST /releases/{namespace}/{name}/{action}", s.act)
	api.HandleFunc("GET /charts", s.listCharts)
	api.HandleFunc("GET /watch/charts", s.watchChartsRoute)
	api.HandleFunc("POST /charts", s.createChart)
	api.HandleFunc("GET /charts/{namespace}/{name}", s.getChart)
	api.HandleFunc("PUT /charts/{namespace}/{name}", s.updateChart)
	api.HandleFunc("PATCH /charts/{namespace}/{name}", s.updateChart)
	api.HandleFunc("DELETE /charts/{namespace}/{name}", s.deleteChart)
	v0 := http.NewServeMux()
	v0.HandleFunc("GET /v0/clusters", s.v0ListClusters)
	v0.HandleFunc("POST /v0/clusters", s.v0CreateCluster)
	v0.HandleFunc("GET /v0/clusters/{clusterId}", s.v0GetCluster)
	v0.HandleFunc("PUT /v0/clusters/{clusterId}", s.v0UpdateCluster)
	v0.HandleFunc("DELETE /v0/clusters/{clusterId}", s.v0DeleteCluster)
	v0.HandleFunc("GET /v0/releases", s.v0ListReleases)
	v0.HandleFunc("POST /v0/releases", s.v0CreateRelease)
	v0.HandleFunc("GET /v0/releases/{releaseId}", s.v0GetRelease)
	v0.HandleFunc("PUT /v0/releases/{releaseId}", s.v0UpdateRelease)
	v0.HandleFunc("DELETE /v0/releases/{releaseId}", s.v0DeleteRelease)
	mux := http.NewServeMux()
	mux.Handle("/v0/", g.cors(v0Errors(g.authenticated(withStatusErrors(v0, v0Routes)))))
	dashboard := page()
	mux.Handle("GET /{$}", dashboard)
	mux.Handle("GET /ui/", dashboard)
	mux.Handle("/", g.cors(g.authenticated(withStatusErrors(api, apiRoutes))))
	return g.servedOnly(mux)
}

// The routes a 404 names.
const (
	apiRoutes = "GET /clusters, /watch/clusters, /clusters/NAMESPACE/NAME, /watch/clusters/NAMESPACE/NAME, /releases, /watch/releases, /releases/NAMESPACE/NAME/rollout, /charts, /watch/charts, /charts/NAMESPACE/NAME"
	v0Routes  = "Optikon's: /v0/clusters, /v0/clusters/CLUSTER, /v0/releases, /v0/releases/RELEASE"
)

// withStatusErrors answers a request that no route of api takes as the registry would, with a
// Status: 404 for a path it does not serve, 405 (with Allow) for a method a route does not take.
// Go's mux answers them in plain text.
func withStatusErrors(api *http.ServeMux, routes string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := api.Handler(r)
		if pattern != "" {
			api.ServeHTTP(w, r) // the mux, not h: it sets the route's path values
			return
		}
		// The mux's own answer says which of the two it is, and which methods the path takes.
		probe := httptest.NewRecorder()
		h.ServeHTTP(probe, r)
		if probe.Code == http.StatusMethodNotAllowed {
			allow := probe.Header().Get("Allow")
			w.Header().Set("Allow", allow)
			writeStatus(w, statusError(http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed,
				fmt.Sprintf("%s %s: this route takes %s", r.Method, r.URL.Path, allow)))
			return
		}
		writeStatus(w, statusError(http.StatusNotFound, metav1.StatusReasonNotFound,
			fmt.Sprintf("%s is not a route of this server (%s; fleet-api --help lists them)", r.URL.Path, routes)))
	})
}

// clusterSummary is one member in GET /clusters.
type clusterSummary struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	DisplayName string `json:"displayName,omitempty"`
	// Labels are the Cluster's, which ?labelSelector= selects by.
	Labels map[string]string `json:"labels,omitempty"`
	// Ready, Reason and Version are the Cluster's status, as the health controller wrote it.
	Ready   string     `json:"ready"`
	Reason  string     `json:"reason,omitempty"`
	Version string     `json:"version,omitempty"`
	Nodes   nodeCounts `json:"nodes"`
	// Pods are the member's Pods, Ready of all, unknown as Nodes are.
	Pods      nodeCounts `json:"pods"`
	Workloads workloads  `json:"workloads"`
	// Message is the Ready condition's: why a member is not ready, or how its credentials fare.
	Message string `json:"message,omitempty"`
	// CredentialsExpireAt is when the credentials the health controller probes with expire, if
	// they say (RFC 3339).
	CredentialsExpireAt string `json:"credentialsExpireAt,omitempty"`
	// Cache says how current the counts are: a member that is down is "Stale" since when, and
	// its counts are those of then.
	Cache cacheState `json:"cache"`
}

// key is the member's namespace and name.
func (s clusterSummary) key() (string, string) { return s.Namespace, s.Name }

// same reports whether two summaries say the same thing, field by field as constructed: a field
// added to the summary is compared with the rest, and a change to it reaches watchers. Counts
// are pointers (an unknown count is left out, never shown as zero), and DeepEqual compares what
// they point to, so every poll's fresh summary is the same as the last one when it says the
// same. Times are made in UTC without a monotonic reading (cacheState), so one instant compares
// equal.
func (s clusterSummary) same(o clusterSummary) bool { return reflect.DeepEqual(s, o) }

// nodeCounts are a member's Nodes; when its cache holds no list of them (it has not listed them
// yet, or the member refused: its credentials may not list Nodes), Total and Ready are left out
// and Unknown says why. An unknown count is never shown as zero.
type nodeCounts struct {
	Total   *int   `json:"total,omitempty"`
	Ready   *int   `json:"ready,omitempty"`
	Unknown string `json:"unknown,omitempty"`
	// NotPermitted, when the member refuses to list them, says so and what would permit it.
	NotPermitted string `json:"notPermitted,omitempty"`
}

// same reports whether two counts say the same thing (they hold pointers: == compares where).
func (c nodeCounts) same(o nodeCounts) bool {
	return ptr.Equal(c.Total, o.Total) && ptr.Equal(c.Ready, o.Ready) && c.Unknown == o.Unknown && c.NotPermitted == o.NotPermitted
}

// workloads are a member's Deployments, unknown as nodeCounts are.
type workloads struct {
	Deployments      *int   `json:"deployments,omitempty"`
	DeploymentsReady *int   `json:"deploymentsReady,omitempty"`
	Unknown          string `json:"unknown,omitempty"`
	NotPermitted     string `json:"notPermitted,omitempty"`
}

type cacheState struct {
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Error string    `json:"error,omitempty"`
}

// clusterDetail is GET /clusters/{namespace}/{name}.
type clusterDetail struct {
	clusterSummary
	NodeList       []nodeInfo       `json:"nodeList"`
	DeploymentList []deploymentInfo `json:"deploymentList"`
}

type nodeInfo struct {
	Name           string `json:"name"`
	Ready          bool   `json:"ready"`
	KubeletVersion string `json:"kubeletVersion,omitempty"`
}

type deploymentInfo struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	Replicas      int32  `json:"replicas"`
	ReadyReplicas int32  `json:"readyReplicas"`
	Ready         bool   `json:"ready"`
}

// listClusters answers the members of the cluster sets where the caller may list Clusters, as
// listing them in the registry would; computed once per change (serveAnswer).
func (s *server) listClusters(w http.ResponseWriter, r *http.Request) {
	selected, err := parseSelection(r.URL.Query())
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	version := s.inputs()
	version.feed = s.feed.revision() // the answer carries it
	members := s.fleet.Members()
	sets, err := s.listableSets(r, members)
	if err != nil {
		writeStatus(w, err)
		return
	}
	s.serveAnswer(w, r, answerKey("clusters", sets, r.URL.Query()), version, true, func() any {
		out := make([]clusterSummary, 0, len(members))
		for _, m := range members {
			if _, ok := slices.BinarySearch(sets, m.Name().Namespace); !ok {
				continue
			}
			if summary, _, _ := s.summarize(m); selected.matches(summary) {
				out = append(out, summary)
			}
		}
		return map[string]any{"clusters": out, "registry": version.fleet, "resourceVersion": formatRev(version.feed)}
	})
}

// listableSets are the cluster sets of members where the registry lets the caller list Clusters,
// sorted.
func (s *server) listableSets(r *http.Request, members []*multicluster.Member) ([]string, error) {
	var sets []string
	asked := map[string]bool{}
	last := ""
	for _, m := range members {
		ns := m.Name().Namespace
		if ns == last || asked[ns] { // members come by set: most are of the last one's
			continue
		}
		last, asked[ns] = ns, true
		allowed, _, err := s.guard.allowed(r.Context(), "list", ns, "")
		if err != nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("asking the registry what you may list: %w", err))
		}
		if allowed {
			sets = append(sets, ns)
		}
	}
	slices.Sort(sets)
	return sets, nil
}

// authorize reports whether the caller may do verb on Cluster namespace/name, having written the
// registry's answer (403, with its reason) when not.
func (s *server) authorize(w http.ResponseWriter, r *http.Request, verb, namespace, name string) bool {
	allowed, reason, err := s.guard.allowed(r.Context(), verb, namespace, name)
	switch {
	case err != nil:
		writeStatus(w, apierrors.NewInternalError(fmt.Errorf("asking the registry whether you may %s clusters: %w", verb, err)))
		return false
	case !allowed:
		u, _ := genericrequest.UserFrom(r.Context())
		why := fmt.Sprintf("User %q cannot %s resource \"clusters\" in API group %q in the namespace %q", u.GetName(), verb, v1alpha1.GroupName, namespace)
		if reason != "" {
			why += ": " + reason
		}
		writeStatus(w, apierrors.NewForbidden(clusterResource, name, errors.New(why)))
		return false
	}
	return true
}

func (s *server) getCluster(w http.ResponseWriter, r *http.Request) {
	key := types.NamespacedName{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}
	if !s.authorize(w, r, "get", key.Namespace, key.Name) {
		return
	}
	m := s.fleet.Member(key.Namespace, key.Name)
	if m == nil {
		writeStatus(w, apierrors.NewNotFound(clusterResource, key.String()))
		return
	}
	summary, nodes, deployments := s.summarize(m)
	detail := clusterDetail{clusterSummary: summary, NodeList: []nodeInfo{}, DeploymentList: []deploymentInfo{}}
	for _, n := range nodes {
		detail.NodeList = append(detail.NodeList, nodeInfo{Name: n.Name, Ready: nodeReady(n), KubeletVersion: n.Status.NodeInfo.KubeletVersion})
	}
	for _, d := range deployments {
		detail.DeploymentList = append(detail.DeploymentList, deploymentInfo{Namespace: d.Namespace, Name: d.Name,
			Replicas: replicas(d), ReadyReplicas: d.Status.ReadyReplicas, Ready: deploymentReady(d)})
	}
	slices.SortFunc(detail.NodeList, func(a, b nodeInfo) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(detail.DeploymentList, func(a, b deploymentInfo) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	writeJSON(w, http.StatusOK, detail)
}

// summarize is a member's summary from its Cluster and its caches, and the cached objects.
func (s *server) summarize(m *multicluster.Member) (clusterSummary, []*corev1.Node, []*appsv1.Deployment) {
	c := m.Cluster()
	out := clusterSummary{Namespace: c.Namespace, Name: c.Name, DisplayName: c.Spec.DisplayName, Labels: c.Labels, Ready: "Unknown", Version: c.Status.Version}
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionReady); cond != nil {
		out.Ready, out.Reason, out.Message = string(cond.Status), cond.Reason, cond.Message
	}
	if exp := c.Status.CredentialsExpireAt; exp != nil {
		out.CredentialsExpireAt = exp.UTC().Format(time.RFC3339)
	}
	nodes, _ := s.nodes.List(m.Name(), nil)
	deployments, _ := s.deployments.List(m.Name(), nil)
	out.Pods = s.podCounts(m.Name())
	if why, refused := unknown(s.nodes.Status(m.Name())); why != "" || refused {
		out.Nodes.Unknown, out.Nodes.NotPermitted, nodes = why, notPermitted(refused, "nodes"), nil
	} else {
		ready := 0
		for _, n := range nodes {
			if nodeReady(n) {
				ready++
			}
		}
		out.Nodes.Total, out.Nodes.Ready = ptr.To(len(nodes)), ptr.To(ready)
	}
	if why, refused := unknown(s.deployments.Status(m.Name())); why != "" || refused {
		out.Workloads.Unknown, out.Workloads.NotPermitted, deployments = why, notPermitted(refused, "deployments"), nil
	} else {
		ready := 0
		for _, d := range deployments {
			if deploymentReady(d) {
				ready++
			}
		}
		out.Workloads.Deployments, out.Workloads.DeploymentsReady = ptr.To(len(deployments)), ptr.To(ready)
	}
	out.Cache = s.cacheState(m.Name())
	return out, nodes, deployments
}

// unknown is why a member's cache of a kind has no count to give, or "" when it has one: synced,
// or stale (the counts of when it was last current, which Cache says). refused is true instead
// when the member refuses to list the kind: a settled answer, not a wait.
func unknown(st fleetcache.Status, ok bool) (why string, refused bool) {
	switch {
	case !ok:
		return "not cached", false
	case st.State != fleetcache.Syncing:
		return "", false
	case st.Refused():
		return "", true
	case st.Err != nil:
		return "not listed yet: " + st.Err.Error(), false
	}
	return "not listed yet", false
}

// notPermitted says, when refused, that the member's account may not list resource and what
// would permit it; "" otherwise. join's default role (edit) may not list Nodes.
func notPermitted(refused bool, resource string) string {
	if !refused {
		return ""
	}
	return "the member's account may not list " + resource + ": join the member with --cluster-role naming a ClusterRole that may get, list and watch " + resource + ", or bind one to the account"
}

// notPermittedState is a member's cache state when it refuses every kind: nothing to wait for.
const notPermittedState = "NotPermitted"

// cacheState is the least current of the member's caches of the kinds it lets its account list:
// a kind it refuses is a settled answer (the counts say so), not a cache forever syncing.
func (s *server) cacheState(member types.NamespacedName) cacheState {
	// Until a cache says, Syncing since an unknown time (zero): a time of now would change at every
	// look, and so would the summary that watchers are sent.
	worst := fleetcache.Status{State: fleetcache.Syncing}
	found, refused := false, 0
	for _, get := range []func(types.NamespacedName) (fleetcache.Status, bool){s.nodes.Status, s.deployments.Status, s.pods.Status} {
		st, ok := get(member)
		if !ok {
			continue
		}
		if st.Refused() {
			refused++
			continue
		}
		if !found || rank(st.State) > rank(worst.State) || (st.State == worst.State && st.Since.Before(worst.Since)) {
			worst, found = st, true
		}
	}
	if !found && refused > 0 {
		return cacheState{State: notPermittedState}
	}
	out := cacheState{State: worst.State.String(), Since: worst.Since.Round(0).UTC()}
	if worst.Err != nil {
		out.Error = worst.Err.Error()
	}
	return out
}

// rank orders cache states from the most current.
func rank(s fleetcache.State) int {
	switch s {
	case fleetcache.Synced:
		return 0
	case fleetcache.Syncing:
		return 1
	}
	return 2
}

var clusterResource = schema.GroupResource{Group: v1alpha1.GroupName, Resource: "clusters"}

// maxBody bounds a POSTed Cluster: a Cluster is small, and the registry refuses large objects anyway.
const maxBody = 1 << 20

// createCluster registers a Cluster, checked with ValidateCluster first so that a bad one is
// refused with every field's problem before the registry is asked.
// The caller's write is checked first (whether they may, then ValidateCluster, so that a bad
// Cluster is refused with every field's problem), then carried out as the caller.
func (s *server) createCluster(w http.ResponseWriter, r *http.Request) {
	c, ok := s.decodeCluster(w, r)
	if !ok {
		return
	}
	if c.Namespace == "" {
		writeStatus(w, apierrors.NewBadRequest("metadata.namespace is required: it names the cluster set"))
		return
	}
	if !s.authorize(w, r, "create", c.Namespace, "") || !validCluster(w, c) {
		return
	}
	clusters, ok := s.callerClusters(w, r, c.Namespace)
	if !ok {
		return
	}
	created, err := clusters.Create(r.Context(), c, metav1.CreateOptions{FieldManager: "fleet-api"})
	if err != nil {
		writeStatus(w, err)
		return
	}
	created.ManagedFields = nil
	writeJSON(w, http.StatusCreated, created)
}

// updateCluster replaces a Cluster (PUT), as the registry's update does: the body's
// resourceVersion, when given, must be the current one.
func (s *server) updateCluster(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	c, ok := s.decodeCluster(w, r)
	if !ok {
		return
	}
	if (c.Namespace != "" && c.Namespace != ns) || c.Name != name {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("the body's metadata names %s/%s, the path %s/%s", c.Namespace, c.Name, ns, name)))
		return
	}
	c.Namespace = ns
	if !s.authorize(w, r, "update", ns, name) || !validCluster(w, c) {
		return
	}
	clusters, ok := s.callerClusters(w, r, ns)
	if !ok {
		return
	}
	updated, err := replaceCluster(r.Context(), clusters, c)
	if err != nil {
		writeStatus(w, err)
		return
	}
	updated.ManagedFields = nil
	writeJSON(w, http.StatusOK, updated)
}

// replaceCluster updates c as clusters' caller, as the registry's update does: with the body's
// resourceVersion when it gives one, else the current one.
func replaceCluster(ctx context.Context, clusters clusterregistryv1alpha1.ClusterInterface, c *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	if c.ResourceVersion == "" {
		current, err := clusters.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		c.ResourceVersion = current.ResourceVersion
	}
	return clusters.Update(ctx, c, metav1.UpdateOptions{FieldManager: "fleet-api"})
}

// patchCluster changes part of a Cluster (PATCH, a JSON merge patch), checked by the registry's
// validation as any write.
func (s *server) patchCluster(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	patch, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil || !json.Valid(patch) {
		writeStatus(w, apierrors.NewBadRequest("the body is not a JSON merge patch"))
		return
	}
	if !s.authorize(w, r, "patch", ns, name) {
		return
	}
	clusters, ok := s.callerClusters(w, r, ns)
	if !ok {
		return
	}
	patched, err := clusters.Patch(r.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "fleet-api"})
	if err != nil {
		writeStatus(w, err)
		return
	}
	patched.ManagedFields = nil
	writeJSON(w, http.StatusOK, patched)
}

// callerClusters is the registry's Clusters of namespace as the caller, having written why not
// when it cannot be had.
func (s *server) callerClusters(w http.ResponseWriter, r *http.Request, namespace string) (clusterregistryv1alpha1.ClusterInterface, bool) {
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		writeStatus(w, err)
		return nil, false
	}
	return registry.ClusterregistryV1alpha1().Clusters(namespace), true
}

// decodeCluster reads a Cluster from the body, having written why not when it cannot.
func (s *server) decodeCluster(w http.ResponseWriter, r *http.Request) (*v1alpha1.Cluster, bool) {
	var c v1alpha1.Cluster
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("the body is not a Cluster: %v", err)))
		return nil, false
	}
	return &c, true
}

// validCluster checks c as the registry would, having written every field's problem when not.
func validCluster(w http.ResponseWriter, c *v1alpha1.Cluster) bool {
	if errs := v1alpha1.ValidateCluster(c); len(errs) > 0 {
		writeStatus(w, apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind("Cluster").GroupKind(), c.Name, errs))
		return false
	}
	return true
}

func (s *server) deleteCluster(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if !s.authorize(w, r, "delete", ns, name) {
		return
	}
	clusters, ok := s.callerClusters(w, r, ns)
	if !ok {
		return
	}
	if err := clusters.Delete(r.Context(), name, metav1.DeleteOptions{}); err != nil {
		writeStatus(w, err)
		return
	}
	writeJSON(w, http.StatusOK, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Group: v1alpha1.GroupName, Kind: "clusters", Name: name}})
}

// deleteClusters deletes the Clusters of one cluster set (?namespace=, required: a collection
// never spans sets) that ?labelSelector= and ?fieldSelector= choose, as the registry's
// deletecollection does, and as the caller: it answers the registry's list of what it deleted.
// Without a selector it deletes every Cluster of the set, as the registry does.
func (s *server) deleteClusters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ns := q.Get("namespace")
	if ns == "" {
		writeStatus(w, apierrors.NewBadRequest("?namespace= is required: it names the cluster set whose Clusters are deleted (a collection never spans sets)"))
		return
	}
	if _, err := parseSelection(q); err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	if !s.authorize(w, r, "deletecollection", ns, "") {
		return
	}
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		writeStatus(w, err)
		return
	}
	// The typed client's DeleteCollection drops the registry's answer: the REST call keeps it.
	var deleted v1alpha1.ClusterList
	err = registry.ClusterregistryV1alpha1().RESTClient().Delete().Namespace(ns).Resource("clusters").
		Param("labelSelector", q.Get("labelSelector")).Param("fieldSelector", q.Get("fieldSelector")).
		Body(&metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"}}).
		Do(r.Context()).Into(&deleted)
	if err != nil {
		writeStatus(w, err)
		return
	}
	for i := range deleted.Items {
		deleted.Items[i].ManagedFields = nil
	}
	deleted.TypeMeta = metav1.TypeMeta{Kind: "ClusterList", APIVersion: v1alpha1.SchemeGroupVersion.String()}
	writeJSON(w, http.StatusOK, &deleted)
}

// statusError is an error that writeStatus answers with code, reason and message as they are.
func statusError(code int, reason metav1.StatusReason, message string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message}}
}

// writeStatus writes err as a Kubernetes Status, as an API server would: the registry's own
// errors pass through with their code and reason.
func writeStatus(w http.ResponseWriter, err error) {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	code := int(st.Code)
	if code == 0 {
		code = http.StatusInternalServerError
	}
	writeJSON(w, code, &st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// podCounts are the member's Pods, Ready of all; unknown, saying why, when its cache has none.
func (s *server) podCounts(member types.NamespacedName) nodeCounts {
	if why, refused := unknown(s.pods.Status(member)); why != "" || refused {
		return nodeCounts{Unknown: why, NotPermitted: notPermitted(refused, "pods")}
	}
	pods, _ := s.pods.List(member, nil)
	ready := 0
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return nodeCounts{Total: ptr.To(len(pods)), Ready: ptr.To(ready)}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func replicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}

// deploymentReady is whether the Deployment's controller has seen its latest spec and every
// replica is ready.
func deploymentReady(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.ReadyReplicas >= replicas(d)
}
