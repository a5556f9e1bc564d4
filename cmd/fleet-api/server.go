package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/capacity"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
	"github.com/cluster-registry/sdk/fleetcache"
	"github.com/cluster-registry/sdk/helmrelease"
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
		LabelSelector: helmrelease.StorageSelector, Transform: optikon.SummarizeHelmSecret})
	if err != nil {
		return err
	}
	return nil
}

// startServer follows the registry's Clusters in namespaces (all when empty) and caches every
// member's Nodes and Deployments. Stop it with stop. A part that fails to start stops those
// started before it, in reverse order, in one place.
func startServer(ctx context.Context, registry versioned.Interface, resolver *access.Resolver, namespaces []string) (_ *server, err error) {
	s := &server{namespaces: namespaces}
	var started []func() // what stops the parts started so far
	defer func() {
		if err != nil {
			for _, stop := range slices.Backward(started) {
				stop()
			}
		}
	}()
	s.fleet = multicluster.NewFleet(registry, resolver, multicluster.FleetOptions{Namespaces: namespaces})
	if err := s.fleet.Start(ctx); err != nil {
		return nil, fmt.Errorf("following the registry: %w", err)
	}
	started = append(started, s.fleet.Stop)
	s.caches = fleetcache.New(s.fleet)
	if err := s.cacheKinds(); err != nil {
		return nil, err
	}
	if err := s.caches.Start(ctx); err != nil {
		return nil, err
	}
	started = append(started, s.caches.Stop)
	feedCtx, stopFeed := context.WithCancel(ctx)
	started = append(started, stopFeed)
	if s.charts, err = watchCharts(feedCtx, registry, namespaces); err != nil {
		return nil, err
	}
	started = append(started, s.charts.stop)
	s.feed, s.answers = newFeed(4096), answercache.New[inputs](keptAnswers, keptAnswerBytes)
	if s.stopFollowing, err = s.followChanges(); err != nil {
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
	api := httpapi.WithStatusErrors(httpapi.Mux(s, apiRoutes, httpapi.EncodeNative), "fleet-api's API", apiRoutes, httpapi.EncodeNative)
	mux := http.NewServeMux()
	mux.Handle("/v0/", g.cors(g.authenticated(optikon.Encode, optikon.New(optikonCore{s}).Handler())))
	dashboard := page()
	mux.Handle("GET /{$}", dashboard)
	mux.Handle("GET /ui/", dashboard)
	mux.Handle("/", g.cors(g.authenticated(httpapi.EncodeNative, api)))
	return g.servedOnly(mux)
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
	// Capacity is what the Cluster's status.resources says, as the capacity controller wrote
	// it; absent before it has. Its time is left out, so that a heartbeat that moved nothing
	// sends a watcher nothing.
	Capacity *capacitySummary `json:"capacity,omitempty"`
}

// capacitySummary is a member's status.resources in short: Nodes ready and schedulable, and
// cpu and memory requested of what they offer ("5100m/12").
type capacitySummary struct {
	ReadyNodes int32  `json:"readyNodes"`
	Nodes      int32  `json:"nodes"`
	CPU        string `json:"cpu"`
	Memory     string `json:"memory"`
}

// capacityOf is r in short; nil when no capacity controller has written it.
func capacityOf(r *v1alpha1.ClusterResources) *capacitySummary {
	if r == nil {
		return nil
	}
	return &capacitySummary{ReadyNodes: r.ReadyNodes, Nodes: r.Nodes, CPU: capacity.Share(r, corev1.ResourceCPU), Memory: capacity.Share(r, corev1.ResourceMemory)}
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
func (s *server) listClusters(r *http.Request) (response, error) {
	selected, err := parseSelection(r.URL.Query())
	if err != nil {
		return response{}, apierrors.NewBadRequest(err.Error())
	}
	version := s.inputs()
	version.feed = s.feed.revision() // the answer carries it
	members := s.fleet.Members()
	sets, err := s.listableSets(r, members)
	if err != nil {
		return response{}, err
	}
	return s.keptAnswer(answerKey("clusters", sets, r.URL.Query()), version, true, func() any {
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

// getCluster is one member, with its Nodes and Deployments, for a caller who may get it.
func (s *server) getCluster(r *http.Request) (response, error) {
	m, err := s.memberAs(r, "get", r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		return response{}, err
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
	return ok(detail), nil
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
	out.Capacity = capacityOf(c.Status.Resources)
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

// createCluster registers the body's Cluster, in its metadata.namespace, as the caller (201).
func (s *server) createCluster(r *http.Request) (response, error) {
	c, err := decodeCluster(r)
	if err != nil {
		return response{}, err
	}
	if c.Namespace == "" {
		return response{}, apierrors.NewBadRequest("metadata.namespace is required: it names the cluster set")
	}
	created, err := s.registerCluster(r, c)
	if err != nil {
		return response{}, err
	}
	return response{Code: http.StatusCreated, Body: created}, nil
}

// updateCluster replaces a Cluster (PUT), as the registry's update does: the body's
// resourceVersion, when given, must be the current one.
func (s *server) updateCluster(r *http.Request) (response, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	c, err := decodeCluster(r)
	if err != nil {
		return response{}, err
	}
	if (c.Namespace != "" && c.Namespace != ns) || c.Name != name {
		return response{}, apierrors.NewBadRequest(fmt.Sprintf("the body's metadata names %s/%s, the path %s/%s", c.Namespace, c.Name, ns, name))
	}
	c.Namespace = ns
	updated, err := s.replaceCluster(r, c)
	if err != nil {
		return response{}, err
	}
	return ok(updated), nil
}

// patchCluster changes part of a Cluster (PATCH, a JSON merge patch), checked by the registry's
// validation as any write.
func (s *server) patchCluster(r *http.Request) (response, error) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	patch, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil || !json.Valid(patch) {
		return response{}, apierrors.NewBadRequest("the body is not a JSON merge patch")
	}
	clusters, err := s.clustersAs(r, "patch", ns, name, nil)
	if err != nil {
		return response{}, err
	}
	patched, err := clusters.Patch(r.Context(), name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return response{}, err
	}
	patched.ManagedFields = nil
	return ok(patched), nil
}

// deleteCluster removes a Cluster as the caller, answering a Status of success.
func (s *server) deleteCluster(r *http.Request) (response, error) {
	name := r.PathValue("name")
	if err := s.removeCluster(r, r.PathValue("namespace"), name); err != nil {
		return response{}, err
	}
	return ok(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Details: &metav1.StatusDetails{Group: v1alpha1.GroupName, Kind: "clusters", Name: name}}), nil
}

// deleteClusters deletes the Clusters of one cluster set (?namespace=, required: a collection
// never spans sets) that ?labelSelector= and ?fieldSelector= choose, as the registry's
// deletecollection does, and as the caller: it answers the registry's list of what it deleted.
// Without a selector it deletes every Cluster of the set, as the registry does.
func (s *server) deleteClusters(r *http.Request) (response, error) {
	q := r.URL.Query()
	ns := q.Get("namespace")
	if ns == "" {
		return response{}, apierrors.NewBadRequest("?namespace= is required: it names the cluster set whose Clusters are deleted (a collection never spans sets)")
	}
	if _, err := parseSelection(q); err != nil {
		return response{}, apierrors.NewBadRequest(err.Error())
	}
	if err := s.authorize(r, "deletecollection", ns, ""); err != nil {
		return response{}, err
	}
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		return response{}, err
	}
	// The typed client's DeleteCollection drops the registry's answer: the REST call keeps it.
	var deleted v1alpha1.ClusterList
	err = registry.ClusterregistryV1alpha1().RESTClient().Delete().Namespace(ns).Resource("clusters").
		Param("labelSelector", q.Get("labelSelector")).Param("fieldSelector", q.Get("fieldSelector")).
		Body(&metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "v1"}}).
		Do(r.Context()).Into(&deleted)
	if err != nil {
		return response{}, err
	}
	for i := range deleted.Items {
		deleted.Items[i].ManagedFields = nil
	}
	deleted.TypeMeta = metav1.TypeMeta{Kind: "ClusterList", APIVersion: v1alpha1.SchemeGroupVersion.String()}
	return ok(&deleted), nil
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
