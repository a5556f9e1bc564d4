package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// What join makes on a member (a service account and its ClusterRoleBinding) belongs to one
// Cluster of one cluster set of one registry: the same member joined in two sets, or from two
// registries, gets objects of its own for each, and unjoin of one leaves the others' tokens alone.
// Earlier releases named them clusterregistry-<name>, which two joins of one member shared.

// Annotations that record on the member who owns what join made there.
const (
	annotationJoinedRegistry = "clusterregistry.k8s.io/registry" // the registry's ID, registryID
	annotationJoinedCluster  = "clusterregistry.k8s.io/cluster"  // the Cluster, namespace/name
)

// memberAccount is the name of the service account (and binding) that join makes on a member
// for Cluster namespace/name of the registry registryID: readable, and unique by a digest of all
// three, within the 253 characters an object name may have.
func memberAccount(registryID, namespace, name string) string {
	sum := sha256.Sum256([]byte(registryID + "\x00" + namespace + "\x00" + name))
	suffix := "-" + hex.EncodeToString(sum[:4])
	base := "clusterregistry-" + namespace + "-" + name
	if limit := 253 - len(suffix); len(base) > limit {
		base = strings.TrimRight(base[:limit], "-.")
	}
	return base + suffix
}

// legacyMemberAccount is what releases up to v0.1.0 named it.
func legacyMemberAccount(name string) string { return "clusterregistry-" + name }

// ownerAnnotations say, on the member, which registry and Cluster an object of join's belongs to.
func ownerAnnotations(registryID, namespace, name string) map[string]string {
	return map[string]string{annotationJoinedRegistry: registryID, annotationJoinedCluster: namespace + "/" + name}
}

// ownedBy reports whether annotations say the object belongs to that registry's Cluster.
func ownedBy(annotations map[string]string, registryID, namespace, name string) bool {
	return annotations[annotationJoinedRegistry] == registryID && annotations[annotationJoinedCluster] == namespace+"/"+name
}

// sameOwner reports whether annotations name the owner that owner (ownerAnnotations) does.
func sameOwner(annotations, owner map[string]string) bool {
	return annotations[annotationJoinedRegistry] == owner[annotationJoinedRegistry] && annotations[annotationJoinedCluster] == owner[annotationJoinedCluster]
}

// memberNamespace is the namespace join makes on a member for the account (memberAccount): a
// DNS label of 63 characters at most, readable, and unique by the account's digest suffix.
func memberNamespace(account string) string {
	suffix := account[strings.LastIndexByte(account, '-'):]
	base := strings.ReplaceAll(strings.TrimSuffix(account, suffix), ".", "-")
	if limit := 63 - len(suffix); len(base) > limit {
		base = strings.TrimRight(base[:limit], "-")
	}
	return base + suffix
}

// registryID identifies the registry: the UID of its kube-system namespace (the cluster's ID, as
// KEP-2149 defines it), or, when the caller may not read it, the registry's server address.
func registryID(ctx context.Context, kube kubernetes.Interface, cfg *rest.Config) string {
	if ns, err := kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{}); err == nil {
		return string(ns.UID)
	}
	return strings.TrimSuffix(cfg.Host, "/")
}
