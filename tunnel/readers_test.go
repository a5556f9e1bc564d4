package tunnel_test

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/tunnel"
)

// A reader's certificate names who it is, and it reaches the members of the cluster sets whose
// Clusters the registry lets it get, and no other's: a certificate of the readers' CA is not a
// key to every set's members.
func TestReadersReachOnlyTheirSets(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	r := startRig(t)
	ns := fleettest.CopySet(t, lf, "member-1")
	rec := record(t, memberAddress(t))
	r.tunnelledMember(t, ns, rec.addr)
	c := cluster(t, ns)
	as := func(user string) *tunnel.Dialer {
		d := r.dialer()
		d.TLS.Certificates = []tls.Certificate{r.readers.Client(user)}
		return d
	}

	before := rec.connections()
	err := listNamespaces(ctx, resolverFor(t, as("outsider")), c)
	require.ErrorContains(t, err, `reader "outsider"`)
	require.ErrorContains(t, err, "may not get the Clusters of cluster set "+ns)
	require.Equal(t, before, rec.connections(), "an outsider's dial reached the member")

	rbac := kubernetes.NewForConfigOrDie(lf.Registry.Config).RbacV1()
	_, err = rbac.Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "read-clusters"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{v1alpha1.GroupName}, Resources: []string{"clusters"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "insider"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-clusters"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "insider"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return listNamespaces(ctx, resolverFor(t, as("insider")), c) == nil },
		time.Minute, 200*time.Millisecond, "a reader the registry lets read the set did not reach its member")
}
