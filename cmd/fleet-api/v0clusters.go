package main

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// Optikon's UI reads these annotations of each Cluster in GET /v0/clusters. fleet-api computes
// them from its caches when it answers and never writes them to the registry: a Cluster sent
// with them has them dropped. Others (Optikon's Lat and Long) are the caller's, kept as stored.
const (
	// annotationNumPods is how many Pods the member runs, or "unknown" when its caches cannot say.
	annotationNumPods = "NumPods"
	// annotationHealth is Green (Ready, caches current), Yellow (Ready but its caches are not
	// current, or not probed yet) or Red (not Ready).
	annotationHealth = "Health"
)

// v0Cluster is member m's Cluster as /v0 answers it: as the registry has it, with NumPods and
// Health from the caches now.
func (s *server) v0Cluster(m *multicluster.Member) *v1alpha1.Cluster {
	c := m.Cluster().DeepCopy()
	c.TypeMeta = metav1.TypeMeta{Kind: "Cluster", APIVersion: v1alpha1.SchemeGroupVersion.String()}
	c.ManagedFields = nil
	summary, _, _ := s.summarize(m)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annotationNumPods] = "unknown"
	if summary.Pods.Total != nil {
		c.Annotations[annotationNumPods] = strconv.Itoa(*summary.Pods.Total)
	}
	c.Annotations[annotationHealth] = health(summary)
	return c
}

// health is a member's Health in Optikon's words.
func health(s clusterSummary) string {
	switch {
	case s.Ready == string(metav1.ConditionFalse):
		return "Red"
	case s.Ready == string(metav1.ConditionTrue) && s.Cache.State == "Synced":
		return "Green"
	}
	return "Yellow"
}

// v0ListClusters is GET /v0/clusters: every Cluster of the set, for a caller who may list them;
// computed once per change (serveAnswer).
func (s *server) v0ListClusters(w http.ResponseWriter, r *http.Request) {
	ns, err := s.v0Set()
	if err != nil {
		writeStatus(w, err)
		return
	}
	if !s.authorize(w, r, "list", ns, "") {
		return
	}
	version := s.inputs()
	s.serveAnswer(w, r, answerKey("v0/clusters", []string{ns}, nil), version, false, func() any {
		out := []*v1alpha1.Cluster{}
		for _, m := range s.fleet.Members() {
			if m.Name().Namespace == ns {
				out = append(out, s.v0Cluster(m))
			}
		}
		slices.SortFunc(out, func(a, b *v1alpha1.Cluster) int { return strings.Compare(a.Name, b.Name) })
		return out
	})
}

// v0GetCluster is GET /v0/clusters/{clusterId}.
func (s *server) v0GetCluster(w http.ResponseWriter, r *http.Request) {
	ns, err := s.v0Set()
	if err != nil {
		writeStatus(w, err)
		return
	}
	id := r.PathValue("clusterId")
	if !s.authorize(w, r, "get", ns, id) {
		return
	}
	m := s.fleet.Member(ns, id)
	if m == nil {
		writeStatus(w, apierrors.NewNotFound(clusterResource, id))
		return
	}
	writeJSON(w, http.StatusOK, s.v0Cluster(m))
}

// v0Body is the Cluster of a POST or PUT, in the set, without the annotations fleet-api
// computes; ok is false when it has written why not.
func (s *server) v0Body(w http.ResponseWriter, r *http.Request) (*v1alpha1.Cluster, string, bool) {
	ns, err := s.v0Set()
	if err != nil {
		writeStatus(w, err)
		return nil, "", false
	}
	c, ok := s.decodeCluster(w, r)
	if !ok {
		return nil, "", false
	}
	if c.Namespace != "" && c.Namespace != ns {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("metadata.namespace is %q; /v0 serves cluster set %q: leave it out", c.Namespace, ns)))
		return nil, "", false
	}
	c.Namespace = ns
	delete(c.Annotations, annotationNumPods)
	delete(c.Annotations, annotationHealth)
	return c, ns, true
}

// v0CreateCluster is POST /v0/clusters: a Cluster registered as the caller (201).
func (s *server) v0CreateCluster(w http.ResponseWriter, r *http.Request) {
	c, ns, ok := s.v0Body(w, r)
	if !ok || !s.authorize(w, r, "create", ns, "") || !validCluster(w, c) {
		return
	}
	clusters, ok := s.callerClusters(w, r, ns)
	if !ok {
		return
	}
	if _, err := clusters.Create(r.Context(), c, metav1.CreateOptions{FieldManager: "fleet-api"}); err != nil {
		writeStatus(w, err)
		return
	}
	writeAPIResponse(w, http.StatusCreated, fmt.Sprintf("cluster %s registered in cluster set %s", c.Name, ns))
}

// v0UpdateCluster is PUT /v0/clusters/{clusterId}: the Cluster replaced as the caller (200). The
// body's resourceVersion, when given, must be the current one.
func (s *server) v0UpdateCluster(w http.ResponseWriter, r *http.Request) {
	c, ns, ok := s.v0Body(w, r)
	if !ok {
		return
	}
	id := r.PathValue("clusterId")
	if c.Name != id {
		writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("the body's metadata.name is %q, the path's cluster %q", c.Name, id)))
		return
	}
	if !s.authorize(w, r, "update", ns, id) || !validCluster(w, c) {
		return
	}
	clusters, ok := s.callerClusters(w, r, ns)
	if !ok {
		return
	}
	if _, err := replaceCluster(r.Context(), clusters, c); err != nil {
		writeStatus(w, err)
		return
	}
	writeAPIResponse(w, http.StatusOK, fmt.Sprintf("cluster %s updated", id))
}

// v0DeleteCluster is DELETE /v0/clusters/{clusterId}: the Cluster removed as the caller (200).
func (s *server) v0DeleteCluster(w http.ResponseWriter, r *http.Request) {
	ns, err := s.v0Set()
	if err != nil {
		writeStatus(w, err)
		return
	}
	id := r.PathValue("clusterId")
	if !s.authorize(w, r, "delete", ns, id) {
		return
	}
	clusters, ok := s.callerClusters(w, r, ns)
	if !ok {
		return
	}
	if err := clusters.Delete(r.Context(), id, metav1.DeleteOptions{}); err != nil {
		writeStatus(w, err)
		return
	}
	writeAPIResponse(w, http.StatusOK, fmt.Sprintf("cluster %s deleted", id))
}
