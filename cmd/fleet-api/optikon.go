package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/httpapi"
	"github.com/cluster-registry/sdk/cmd/fleet-api/internal/optikon"
	"github.com/cluster-registry/sdk/multicluster"
)

// optikonCore is the server as Optikon's API (package optikon) asks it: the native routes'
// operations, as the caller, and the server's caches.
type optikonCore struct{ s *server }

var _ optikon.Core = optikonCore{}

// Set is the cluster set /v0 serves: --optikon-cluster-set, else fleet-api's one (-n); an error
// when it serves several and none was chosen, since Optikon names a cluster by its name alone.
func (c optikonCore) Set() (string, error) {
	switch s := c.s; {
	case s.optikonSet != "":
		return s.optikonSet, nil
	case len(s.namespaces) == 1:
		return s.namespaces[0], nil
	case len(s.namespaces) == 0:
		return "", httpapi.StatusError(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			"/v0 serves one cluster set, and this server serves every set (-A): run fleet-api with --optikon-cluster-set SET (the chart's fleetAPI.optikonClusterSet), or with -n SET, for Optikon's API")
	default:
		return "", httpapi.StatusError(http.StatusBadRequest, metav1.StatusReasonBadRequest,
			fmt.Sprintf("/v0 serves one cluster set and this server serves %d: run fleet-api with --optikon-cluster-set SET, or with -n SET, for Optikon's API", len(s.namespaces)))
	}
}

func (c optikonCore) Fleet() *multicluster.Fleet { return c.s.fleet }

func (c optikonCore) Member(m *multicluster.Member) optikon.Member {
	summary, _, _ := c.s.summarize(m)
	return optikon.Member{Pods: summary.Pods.Total, Ready: summary.Ready, Synced: summary.Cache.State == "Synced"}
}

func (c optikonCore) Authorize(r *http.Request, resource, verb, ns, name string) error {
	if resource == "clusters" {
		return c.s.authorize(r, verb, ns, name)
	}
	return c.s.authorizeOn(r, resource, verb, ns, name)
}

func (c optikonCore) MemberAs(r *http.Request, verb, ns, name string) (*multicluster.Member, error) {
	return c.s.memberAs(r, verb, ns, name)
}

func (c optikonCore) DecodeCluster(r *http.Request) (*v1alpha1.Cluster, error) {
	return decodeCluster(r)
}

func (c optikonCore) RegisterCluster(r *http.Request, cl *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	return c.s.registerCluster(r, cl)
}

func (c optikonCore) ReplaceCluster(r *http.Request, cl *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	return c.s.replaceCluster(r, cl)
}

func (c optikonCore) RemoveCluster(r *http.Request, ns, name string) error {
	return c.s.removeCluster(r, ns, name)
}

func (c optikonCore) CallerConfig(ctx context.Context) (*rest.Config, error) {
	return c.s.guard.callerConfig(ctx)
}

// Kept reads what the answer depends on before compute reads anything (keptAnswer); the lists a
// UI polls are compact.
func (c optikonCore) Kept(route, set string, query url.Values, compute func() any) (httpapi.Response, error) {
	version := c.s.inputs()
	return c.s.keptAnswer(answerKey(route, []string{set}, query), version, false, compute)
}

func (c optikonCore) Releases(ns string) []*v1alpha1.Release {
	var out []*v1alpha1.Release
	for _, rl := range c.s.charts.releases {
		list, _ := rl.Releases(ns).List(labels.Everything())
		out = append(out, list...)
	}
	return out
}

func (c optikonCore) HelmStorage(m *multicluster.Member, selector labels.Selector) []*corev1.Secret {
	secrets, _ := c.s.helm.List(m.Name(), selector)
	return secrets
}
