package join

import (
	"context"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/clientset/versioned"
)

// Registry is the registry side of a join: the cluster set, and clients with the permissions of
// whoever joins.
type Registry struct {
	// Namespace is the cluster set the member joins. Required.
	Namespace string
	// Clusters writes the Cluster; Kube writes its token Secret. Required.
	Clusters versioned.Interface
	Kube     kubernetes.Interface
	// Server is the registry's API server address: it names the registry on members when Kube
	// may not read the registry's kube-system namespace, whose UID names it otherwise (ID).
	Server string
}

// RegistryFor is the Registry of cluster set namespace at the API server config reaches.
func RegistryFor(config *rest.Config, namespace string) (Registry, error) {
	r := Registry{Namespace: namespace, Server: strings.TrimSuffix(config.Host, "/")}
	var err error
	if r.Clusters, err = versioned.NewForConfig(config); err != nil {
		return Registry{}, fmt.Errorf("join: a client of the registry: %w", err)
	}
	if r.Kube, err = kubernetes.NewForConfig(config); err != nil {
		return Registry{}, fmt.Errorf("join: a client of the registry: %w", err)
	}
	return r, nil
}

func (r Registry) validate() error {
	switch {
	case r.Namespace == "":
		return fmt.Errorf("join.Registry.Namespace is empty: name the cluster set")
	case r.Clusters == nil || r.Kube == nil:
		return fmt.Errorf("join.Registry needs Clusters and Kube (RegistryFor makes them)")
	}
	return nil
}

// ID identifies the registry on members: the UID of its kube-system namespace (the cluster's ID,
// as KEP-2149 defines it), or, when Kube may not read it, its Server address.
func (r Registry) ID(ctx context.Context) string {
	if ns, err := r.Kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{}); err == nil {
		return string(ns.UID)
	}
	return strings.TrimSuffix(r.Server, "/")
}
