package mcprovider

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
	mcmulticluster "sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// ClusterName is the multicluster-runtime name of the member with the given registry key:
// "namespace/name", the cluster set first.
func ClusterName(member types.NamespacedName) mcmulticluster.ClusterName {
	return mcmulticluster.ClusterName(member.Namespace + "/" + member.Name)
}

// MemberKey is the registry key of a cluster name that ClusterName made, and false for any other
// name.
func MemberKey(name mcmulticluster.ClusterName) (types.NamespacedName, bool) {
	namespace, cluster, ok := strings.Cut(string(name), "/")
	if !ok || namespace == "" || cluster == "" || strings.Contains(cluster, "/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: namespace, Name: cluster}, true
}
