package access

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// SecretOf is the Secret that provider p of Cluster c points at, for the well-known types that
// read one (secret and kubeconfig-secret): in the Cluster's own namespace unless config.namespace
// names another, named by config.name (for kubeconfig-secret, "<cluster>-kubeconfig" when unset).
// ok is false for another type, or a secret provider that names no Secret.
//
// It is the one answer to "which Secret" in the SDK: the Resolver reads this Secret, and whoever
// reads or writes it besides (a rotator renewing its token, a command showing when it expires)
// must mean the same one. It says where the pointer leads, not whether a reader may follow it:
// another namespace is followed only where ResolverOptions.SecretNamespaces allows it, and what
// a Resolver did not resolve must not be read on its account.
func SecretOf(c *v1alpha1.Cluster, p v1alpha1.AuthProviderConfig) (types.NamespacedName, bool) {
	name := p.Config["name"]
	switch p.Type.Name {
	case v1alpha1.ProviderTypeSecret:
	case v1alpha1.ProviderTypeKubeconfigSecret:
		if name == "" {
			name = v1alpha1.KubeconfigSecretName(c.Name)
		}
	default:
		return types.NamespacedName{}, false
	}
	if name == "" {
		return types.NamespacedName{}, false
	}
	namespace := p.Config["namespace"]
	if namespace == "" {
		namespace = c.Namespace
	}
	return types.NamespacedName{Namespace: namespace, Name: name}, true
}
