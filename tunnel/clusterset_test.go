package tunnel_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/testkit/fleettest"
	"github.com/cluster-registry/sdk/testkit/realservers"
	"github.com/cluster-registry/sdk/tunnel"
)

// A tunnel server of one cluster set (ServerOptions.Namespace; the chart's clusterSet, the
// command's -n) runs with the registry's leave to read ServiceAccounts in that set alone, as the
// chart binds deploy/tunnel/clusterrole.yaml: its set's agent connects and is read through, and
// an agent of another set is refused before its ServiceAccount is read, by a refusal that names
// the set.
func TestAServerOfOneClusterSet(t *testing.T) {
	realservers.Required(t)
	ctx := fleettest.Context(t, 2*time.Minute)
	ns := fleettest.CopySet(t, lf, "member-1")
	other := fleettest.NewSet(t, lf)
	registry := tunnelServerAccount(t, ns)
	r := startRigWith(t, func(o *tunnel.ServerOptions) { o.Registry, o.Namespace = registry, ns })
	r.tunnelledMember(t, ns, memberAddress(t))
	require.NoError(t, listNamespaces(ctx, resolverFor(t, r.dialer()), cluster(t, ns)))

	stranger := access.TunnelHost(other, "member-1-agent")
	r.startAgent(t, r.agentAccount(t, other, "member-1-agent", memberAddress(t)), stranger)
	require.Eventually(t, func() bool { return r.logged("is not of cluster set " + ns) }, time.Minute, 50*time.Millisecond,
		"the server did not refuse the agent of another cluster set for its set")
	require.False(t, r.server.Connected(stranger))
}

// tunnelServerAccount is a client of the registry as a user bound to deploy/tunnel/clusterrole.yaml
// as the chart binds it for cluster set ns: clusterregistry-tunnel cluster-wide, and
// clusterregistry-tunnel-accounts in ns alone.
func tunnelServerAccount(t *testing.T, ns string) kubernetes.Interface {
	t.Helper()
	ctx := fleettest.Context(t, time.Minute)
	admin := kubernetes.NewForConfigOrDie(lf.Registry.Config)
	data, err := os.ReadFile(filepath.Join("..", "deploy", "tunnel", "clusterrole.yaml"))
	require.NoError(t, err)
	user := "tunnel-server-of-" + ns
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var role rbacv1.ClusterRole
		require.NoError(t, yaml.UnmarshalStrict([]byte(doc), &role))
		shipped := role.Name
		role.Name = ns + "-" + shipped
		_, err := admin.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = admin.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{}) })
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name}
		if shipped == "clusterregistry-tunnel" {
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: role.Name}, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
			t.Cleanup(func() { _ = admin.RbacV1().ClusterRoleBindings().Delete(ctx, role.Name, metav1.DeleteOptions{}) })
		} else {
			_, err = admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: shipped}, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
		}
		require.NoError(t, err)
	}
	cfg := rest.CopyConfig(lf.Registry.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return kubernetes.NewForConfigOrDie(cfg)
}
