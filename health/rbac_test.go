package health_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/health"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// The shipped ClusterRole is all the controller needs: run as a service account bound to exactly
// it in the cluster set's namespace, it probes, writes status and events, and leads.
func TestRunsWithTheShippedClusterRole(t *testing.T) {
	realservers.Required(t)
	lf := localfleet.StartForTest(t, localfleet.Options{Members: 1})
	ctx := t.Context()
	admin := kubernetes.NewForConfigOrDie(lf.Registry.Config)

	data, err := os.ReadFile("../deploy/health/clusterrole.yaml")
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(data, &role))
	_, err = admin.RbacV1().ClusterRoles().Create(ctx, &role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.CoreV1().ServiceAccounts(lf.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "health"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings(lf.Namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "health"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: lf.Namespace, Name: "health"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	tr, err := admin.CoreV1().ServiceAccounts(lf.Namespace).CreateToken(ctx, "health", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	sa := rest.AnonymousClientConfig(lf.Registry.Config)
	sa.BearerToken = tr.Status.Token

	saKube := kubernetes.NewForConfigOrDie(sa)
	resolver, err := access.NewResolver(access.ResolverOptions{Secrets: access.SecretsFromClient(saKube)})
	require.NoError(t, err)
	opts := fastOptions(lf)
	opts.Registry, opts.Kube, opts.Resolver = versioned.NewForConfigOrDie(sa), saKube, resolver
	opts.LeaderElection = &health.LeaderElection{Namespace: lf.Namespace}
	stop := start(t, opts)
	defer stop()

	require.NoError(t, lf.Members[0].StopAPIServer())
	waitFor(t, lf, "member-1", "False/Unreachable")
	requireEvent(t, admin, lf.Namespace, "member-1", "Unreachable")
	_, err = admin.CoordinationV1().Leases(lf.Namespace).Get(ctx, "clusterregistry-health", metav1.GetOptions{})
	require.NoError(t, err)
}
