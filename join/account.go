package join

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// What Join makes on a member (a namespace, a service account, its bindings) belongs to one
// Cluster of one cluster set of one registry: the same member joined in two sets, or from two
// registries, gets objects of its own for each, and unjoining one leaves the others' tokens
// alone. Releases up to v0.1.0 named them clusterregistry-<name>, which two joins shared.

// Annotations that record, on each object Join makes on a member, whose it is.
const (
	// RegistryAnnotation is the registry's ID (Registry.ID).
	RegistryAnnotation = v1alpha1.GroupName + "/registry"
	// ClusterAnnotation is the Cluster, as namespace/name.
	ClusterAnnotation = v1alpha1.GroupName + "/cluster"
)

// Account names what Join makes on a member for one Cluster: a namespace of the account's own,
// the service account in it, a ClusterRoleBinding of the account's name to the ClusterRole, and
// a Role and RoleBinding of that name in the namespace that let it renew its own token.
type Account struct {
	Namespace string
	Name      string
}

// String is namespace/name, as the token Secret's v1alpha1.ServiceAccountAnnotation records it.
func (a Account) String() string { return a.Namespace + "/" + a.Name }

// AccountFor is the Account that Join makes for Cluster namespace/name of the registry whose ID
// is registryID: readable, and unique by a digest of all three. The name fits the 253 characters
// of an object name, the namespace the 63 of a DNS label.
func AccountFor(registryID, namespace, name string) Account {
	sum := sha256.Sum256([]byte(registryID + "\x00" + namespace + "\x00" + name))
	suffix := "-" + hex.EncodeToString(sum[:4])
	base := "clusterregistry-" + namespace + "-" + name
	if limit := 253 - len(suffix); len(base) > limit {
		base = strings.TrimRight(base[:limit], "-.")
	}
	account := base + suffix
	nsBase := strings.ReplaceAll(base, ".", "-")
	if limit := 63 - len(suffix); len(nsBase) > limit {
		nsBase = strings.TrimRight(nsBase[:limit], "-")
	}
	return Account{Namespace: nsBase + suffix, Name: account}
}

// legacyAccountNamespace held, on each member, the service accounts that join made in v0.1.0 and
// builds of main after it, until accounts had namespaces of their own: an account may make Secrets
// in its namespace (its tokens are bound to them), which in kube-system would be unsafe.
const legacyAccountNamespace = "kube-system"

// legacySharedAccount is what releases up to v0.1.0 named the account, shared by every set
// that joined the member under that name.
func legacySharedAccount(name string) string { return "clusterregistry-" + name }

// owner is the annotations that say an object belongs to registryID's Cluster namespace/name.
func owner(registryID, namespace, name string) map[string]string {
	return map[string]string{RegistryAnnotation: registryID, ClusterAnnotation: namespace + "/" + name}
}

// ownedBy reports whether annotations name the owner that want (owner) does.
func ownedBy(annotations, want map[string]string) bool {
	return annotations[RegistryAnnotation] == want[RegistryAnnotation] && annotations[ClusterAnnotation] == want[ClusterAnnotation]
}
