package main

import (
	"context"
	"fmt"
	"strings"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/clientset/versioned"
)

// factory is the command's one way to its clients, as kubectl's cmdutil.Factory is kubectl's:
// the registry's, from kubectl's connection flags (cli-runtime's ConfigFlags), and a member's,
// from a context of the same kubeconfig.
type factory struct {
	flags *genericclioptions.ConfigFlags
}

// registry is what a subcommand needs of the registry: its config, the cluster set that -n (or
// the context) names, and clients for Clusters and for the rest.
type registry struct {
	Config *rest.Config
	// Namespace is -n's, or else the kubeconfig context's; NamespaceGiven says -n was given.
	Namespace      string
	NamespaceGiven bool
	Clusters       versioned.Interface
	Kube           kubernetes.Interface
}

// Registry connects to the registry.
func (f *factory) Registry() (*registry, error) {
	cfg, err := f.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reaching the registry: %w", err)
	}
	namespace, given, err := f.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("reaching the registry: %w", err)
	}
	r := &registry{Config: cfg, Namespace: namespace, NamespaceGiven: given}
	if r.Clusters, err = versioned.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if r.Kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	return r, nil
}

// ClusterSetExists refuses a cluster set (namespace) that the registry does not have: a controller
// or a pass over a set that does not exist would otherwise run on, or report "nothing to do", for
// a mistyped -n. A caller who may not read namespaces is not refused: the registry's answers to
// what it does next will say.
func (r *registry) ClusterSetExists(ctx context.Context, namespace string) error {
	_, err := r.Kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster set %q does not exist: the registry at %s has no namespace %s (clusterregistry install --create-namespace -n %s makes one)",
			namespace, r.Config.Host, namespace, namespace)
	}
	return nil
}

// Extensions is the registry's apiextensions client, for the CRD.
func (f *factory) Extensions() (apiextensionsclient.Interface, error) {
	cfg, err := f.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reaching the registry: %w", err)
	}
	return apiextensionsclient.NewForConfig(cfg)
}

// Member is the config of a context of the user's kubeconfig (a member to join or unjoin), and
// its server.
func (f *factory) Member(context string) (*rest.Config, string, error) {
	raw, err := f.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if _, ok := raw.Contexts[context]; !ok {
		// Not a usage error: the command line is well formed, the kubeconfig lacks the context
		// (as kubectl --context nosuch, exit 1).
		return nil, "", fmt.Errorf("context %q is not in the kubeconfig (it has: %s)", context, strings.Join(sortedKeys(raw.Contexts), ", "))
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(raw, context, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("context %q: %w", context, err)
	}
	if cfg.Host == "" {
		return nil, "", fmt.Errorf("context %q: its cluster has no server address", context)
	}
	return cfg, strings.TrimSuffix(cfg.Host, "/"), nil
}

// MemberKube is a clientset for a member's config.
func (f *factory) MemberKube(cfg *rest.Config) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(cfg)
}
