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
func (s *server) v0ListClusters(r *http.Request) (response, error) {
	ns, err := s.v0Set()
	if err != nil {
		return response{}, err
	}
	if err := s.authorize(r, "list", ns, ""); err != nil {
		return response{}, err
	}
	version := s.inputs()
	return s.keptAnswer(answerKey("v0/clusters", []string{ns}, nil), version, false, func() any {
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
func (s *server) v0GetCluster(r *http.Request) (response, error) {
	ns, err := s.v0Set()
	if err != nil {
		return response{}, err
	}
	m, err := s.memberAs(r, "get", ns, r.PathValue("clusterId"))
	if err != nil {
		return response{}, err
	}
	return ok(s.v0Cluster(m)), nil
}

// v0Body is the Cluster of a POST or PUT, in the set, without the annotations fleet-api
// computes.
func (s *server) v0Body(r *http.Request) (*v1alpha1.Cluster, error) {
	ns, err := s.v0Set()
	if err != nil {
		return nil, err
	}
	c, err := decodeCluster(r)
	if err != nil {
		return nil, err
	}
	if c.Namespace != "" && c.Namespace != ns {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("metadata.namespace is %q; /v0 serves cluster set %q: leave it out", c.Namespace, ns))
	}
	c.Namespace = ns
	delete(c.Annotations, annotationNumPods)
	delete(c.Annotations, annotationHealth)
	return c, nil
}

// v0CreateCluster is POST /v0/clusters: a Cluster registered as the caller (201).
func (s *server) v0CreateCluster(r *http.Request) (response, error) {
	c, err := s.v0Body(r)
	if err == nil {
		_, err = s.registerCluster(r, c)
	}
	if err != nil {
		return response{}, err
	}
	return said(http.StatusCreated, "cluster %s registered in cluster set %s", c.Name, c.Namespace), nil
}

// v0UpdateCluster is PUT /v0/clusters/{clusterId}: the Cluster replaced as the caller (200). The
// body's resourceVersion, when given, must be the current one.
func (s *server) v0UpdateCluster(r *http.Request) (response, error) {
	id := r.PathValue("clusterId")
	c, err := s.v0Body(r)
	if err == nil && c.Name != id {
		err = apierrors.NewBadRequest(fmt.Sprintf("the body's metadata.name is %q, the path's cluster %q", c.Name, id))
	}
	if err == nil {
		_, err = s.replaceCluster(r, c)
	}
	if err != nil {
		return response{}, err
	}
	return said(http.StatusOK, "cluster %s updated", id), nil
}

// v0DeleteCluster is DELETE /v0/clusters/{clusterId}: the Cluster removed as the caller (200).
func (s *server) v0DeleteCluster(r *http.Request) (response, error) {
	id := r.PathValue("clusterId")
	ns, err := s.v0Set()
	if err == nil {
		err = s.removeCluster(r, ns, id)
	}
	if err != nil {
		return response{}, err
	}
	return said(http.StatusOK, "cluster %s deleted", id), nil
}
