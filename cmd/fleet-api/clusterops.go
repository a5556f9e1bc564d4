package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"

	clusterregistryv1alpha1 "github.com/cluster-registry/sdk/clientset/versioned/typed/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/multicluster"
)

// The Cluster operations that both APIs serve, the native routes and Optikon's /v0: each acts as
// the caller, checked first (whether the registry lets them, then ValidateCluster, so that a bad
// Cluster is refused with every field's problem before the registry is asked), and returns what
// it did or a typed error (an apierrors.APIStatus), which each API's encoder writes in its own
// form.

// fieldManager names fleet-api's writes in the Clusters' managed fields.
const fieldManager = "fleet-api"

// authorize is nil when the caller may do verb on Cluster namespace/name, else the registry's
// answer: 403 with its reason.
func (s *server) authorize(r *http.Request, verb, namespace, name string) error {
	allowed, reason, err := s.guard.allowed(r.Context(), verb, namespace, name)
	switch {
	case err != nil:
		return apierrors.NewInternalError(fmt.Errorf("asking the registry whether you may %s clusters: %w", verb, err))
	case !allowed:
		u, _ := genericrequest.UserFrom(r.Context())
		why := fmt.Sprintf("User %q cannot %s resource \"clusters\" in API group %q in the namespace %q", u.GetName(), verb, v1alpha1.GroupName, namespace)
		if reason != "" {
			why += ": " + reason
		}
		return apierrors.NewForbidden(clusterResource, name, errors.New(why))
	}
	return nil
}

// callerClusters is the registry's Clusters of namespace as the caller.
func (s *server) callerClusters(r *http.Request, namespace string) (clusterregistryv1alpha1.ClusterInterface, error) {
	registry, err := s.guard.asCaller(r.Context())
	if err != nil {
		return nil, err
	}
	return registry.ClusterregistryV1alpha1().Clusters(namespace), nil
}

// decodeCluster reads a Cluster from the body.
func decodeCluster(r *http.Request) (*v1alpha1.Cluster, error) {
	var c v1alpha1.Cluster
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the body is not a Cluster: %v", err))
	}
	return &c, nil
}

// validCluster checks c as the registry would, naming every field's problem.
func validCluster(c *v1alpha1.Cluster) error {
	if errs := v1alpha1.ValidateCluster(c); len(errs) > 0 {
		return apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind("Cluster").GroupKind(), c.Name, errs)
	}
	return nil
}

// memberAs is the member of Cluster namespace/name, for a caller who may do verb on it.
func (s *server) memberAs(r *http.Request, verb, namespace, name string) (*multicluster.Member, error) {
	if err := s.authorize(r, verb, namespace, name); err != nil {
		return nil, err
	}
	m := s.fleet.Member(namespace, name)
	if m == nil {
		return nil, apierrors.NewNotFound(clusterResource, name) // as the registry says it
	}
	return m, nil
}

// clustersAs is the Clusters of namespace as the caller, for a caller who may do verb on
// Cluster name ("" for the set's), with c (when not nil) valid as the registry would have it.
func (s *server) clustersAs(r *http.Request, verb, namespace, name string, c *v1alpha1.Cluster) (clusterregistryv1alpha1.ClusterInterface, error) {
	if err := s.authorize(r, verb, namespace, name); err != nil {
		return nil, err
	}
	if c != nil {
		if err := validCluster(c); err != nil {
			return nil, err
		}
	}
	return s.callerClusters(r, namespace)
}

// registerCluster creates c, in its namespace, as the caller.
func (s *server) registerCluster(r *http.Request, c *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	clusters, err := s.clustersAs(r, "create", c.Namespace, "", c)
	if err != nil {
		return nil, err
	}
	created, err := clusters.Create(r.Context(), c, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, err
	}
	created.ManagedFields = nil
	return created, nil
}

// replaceCluster updates c as the caller, as the registry's update does: with the body's
// resourceVersion when it gives one (which must be the current one), else the current one.
func (s *server) replaceCluster(r *http.Request, c *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	clusters, err := s.clustersAs(r, "update", c.Namespace, c.Name, c)
	if err != nil {
		return nil, err
	}
	updated, err := updateAtVersion(r.Context(), clusters, c)
	if err != nil {
		return nil, err
	}
	updated.ManagedFields = nil
	return updated, nil
}

func updateAtVersion(ctx context.Context, clusters clusterregistryv1alpha1.ClusterInterface, c *v1alpha1.Cluster) (*v1alpha1.Cluster, error) {
	if c.ResourceVersion == "" {
		current, err := clusters.Get(ctx, c.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		c.ResourceVersion = current.ResourceVersion
	}
	return clusters.Update(ctx, c, metav1.UpdateOptions{FieldManager: fieldManager})
}

// removeCluster deletes Cluster namespace/name as the caller.
func (s *server) removeCluster(r *http.Request, namespace, name string) error {
	clusters, err := s.clustersAs(r, "delete", namespace, name, nil)
	if err != nil {
		return err
	}
	return clusters.Delete(r.Context(), name, metav1.DeleteOptions{})
}
