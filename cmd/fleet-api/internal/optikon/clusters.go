package optikon

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/multicluster"
)

// Optikon's UI reads these annotations of each Cluster in GET /v0/clusters. fleet-api computes
// them from its caches when it answers and never writes them to the registry: a Cluster sent
// with them has them dropped. Others (Optikon's Lat and Long) are the caller's, kept as stored.
const (
	// AnnotationNumPods is how many Pods the member runs, or "unknown" when its caches cannot say.
	AnnotationNumPods = "NumPods"
	// AnnotationHealth is Green (Ready, caches current), Yellow (Ready but its caches are not
	// current, or not probed yet) or Red (not Ready).
	AnnotationHealth = "Health"
)

// cluster is member m's Cluster as /v0 answers it: as the registry has it, with NumPods and
// Health from the caches now.
func (a *API) cluster(m *multicluster.Member) *v1alpha1.Cluster {
	c := m.Cluster().DeepCopy()
	c.TypeMeta = metav1.TypeMeta{Kind: "Cluster", APIVersion: v1alpha1.SchemeGroupVersion.String()}
	c.ManagedFields = nil
	state := a.core.Member(m)
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[AnnotationNumPods] = "unknown"
	if state.Pods != nil {
		c.Annotations[AnnotationNumPods] = strconv.Itoa(*state.Pods)
	}
	c.Annotations[AnnotationHealth] = health(state)
	return c
}

// health is a member's Health in Optikon's words.
func health(m Member) string {
	switch {
	case m.Ready == string(metav1.ConditionFalse):
		return "Red"
	case m.Ready == string(metav1.ConditionTrue) && m.Synced:
		return "Green"
	}
	return "Yellow"
}

// listClusters is GET /v0/clusters: every Cluster of the set, for a caller who may list them;
// computed once per change (serveAnswer).
func (a *API) listClusters(r *http.Request) (httpapi.Response, error) {
	ns, err := a.core.Set()
	if err != nil {
		return httpapi.Response{}, err
	}
	if err := a.core.Authorize(r, "clusters", "list", ns, ""); err != nil {
		return httpapi.Response{}, err
	}
	return a.core.Kept("v0/clusters", ns, nil, func() any {
		out := []*v1alpha1.Cluster{}
		for _, m := range a.core.Fleet().Members() {
			if m.Name().Namespace == ns {
				out = append(out, a.cluster(m))
			}
		}
		slices.SortFunc(out, func(a, b *v1alpha1.Cluster) int { return strings.Compare(a.Name, b.Name) })
		return out
	})
}

// getCluster is GET /v0/clusters/{clusterId}.
func (a *API) getCluster(r *http.Request) (httpapi.Response, error) {
	ns, err := a.core.Set()
	if err != nil {
		return httpapi.Response{}, err
	}
	m, err := a.core.MemberAs(r, "get", ns, r.PathValue("clusterId"))
	if err != nil {
		return httpapi.Response{}, err
	}
	return httpapi.OK(a.cluster(m)), nil
}

// body is the Cluster of a POST or PUT, in the set, without the annotations fleet-api
// computes.
func (a *API) body(r *http.Request) (*v1alpha1.Cluster, error) {
	ns, err := a.core.Set()
	if err != nil {
		return nil, err
	}
	c, err := a.core.DecodeCluster(r)
	if err != nil {
		return nil, err
	}
	if c.Namespace != "" && c.Namespace != ns {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("metadata.namespace is %q; /v0 serves cluster set %q: leave it out", c.Namespace, ns))
	}
	c.Namespace = ns
	delete(c.Annotations, AnnotationNumPods)
	delete(c.Annotations, AnnotationHealth)
	return c, nil
}

// createCluster is POST /v0/clusters: a Cluster registered as the caller (201).
func (a *API) createCluster(r *http.Request) (httpapi.Response, error) {
	c, err := a.body(r)
	if err == nil {
		_, err = a.core.RegisterCluster(r, c)
	}
	if err != nil {
		return httpapi.Response{}, err
	}
	return said(http.StatusCreated, "cluster %s registered in cluster set %s", c.Name, c.Namespace), nil
}

// updateCluster is PUT /v0/clusters/{clusterId}: the Cluster replaced as the caller (200). The
// body's resourceVersion, when given, must be the current one.
func (a *API) updateCluster(r *http.Request) (httpapi.Response, error) {
	id := r.PathValue("clusterId")
	c, err := a.body(r)
	if err == nil && c.Name != id {
		err = apierrors.NewBadRequest(fmt.Sprintf("the body's metadata.name is %q, the path's cluster %q", c.Name, id))
	}
	if err == nil {
		_, err = a.core.ReplaceCluster(r, c)
	}
	if err != nil {
		return httpapi.Response{}, err
	}
	return said(http.StatusOK, "cluster %s updated", id), nil
}

// deleteCluster is DELETE /v0/clusters/{clusterId}: the Cluster removed as the caller (200).
func (a *API) deleteCluster(r *http.Request) (httpapi.Response, error) {
	id := r.PathValue("clusterId")
	ns, err := a.core.Set()
	if err == nil {
		err = a.core.RemoveCluster(r, ns, id)
	}
	if err != nil {
		return httpapi.Response{}, err
	}
	return said(http.StatusOK, "cluster %s deleted", id), nil
}
