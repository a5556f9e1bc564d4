package access

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
	"github.com/cluster-registry/sdk/testkit/fleetmain"
	"github.com/cluster-registry/sdk/testkit/realservers"
)

// registry holds the Clusters and credential Secrets; member is the cluster they point at. Both
// are real kube-apiservers with etcd, from a local fleet of one member. Tests register the member
// again in namespaces of their own, with the credentials each test is about.
var registry, member *localfleet.Server

func TestMain(m *testing.M) {
	fleetmain.Main(m, &lf, localfleet.Options{Members: 1}, func(lf *localfleet.Fleet) error {
		registry, member = lf.Registry, lf.Members[0].Server
		return nil
	})
}

// lf is the local fleet that registry and member are of.
var lf *localfleet.Fleet

const testTimeout = 30 * time.Second

// testClientIP is the client address the tests' Resolvers state, so that no test depends on this
// machine's routes.
var testClientIP = netip.MustParseAddr("127.0.0.1")

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func kubeClient(t testing.TB, env *localfleet.Server) kubernetes.Interface {
	t.Helper()
	if env == nil {
		realservers.Required(t)
	}
	return kubernetes.NewForConfigOrDie(env.Config)
}

// memberToken makes a service account on the member, lets it read ConfigMaps, and returns a token
// for it. Deleting the service account revokes the token.
func memberToken(t testing.TB, ns, name string) string {
	t.Helper()
	ctx := testContext(t)
	kube := kubeClient(t, member)
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Not "view": it is aggregated, and no controller-manager runs here to fill it in.
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// memberCluster is a Cluster for the member with the given providers, stored in the registry.
func memberCluster(t testing.TB, ns, name string, providers ...v1alpha1.AuthProviderConfig) *v1alpha1.Cluster {
	t.Helper()
	c := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: member.URL()}},
				CABundle:        member.Config.CAData,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: providers},
		},
	}
	created, err := versioned.NewForConfigOrDie(registry.Config).ClusterregistryV1alpha1().Clusters(ns).Create(testContext(t), c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func provider(name, typ string, config map[string]string) v1alpha1.AuthProviderConfig {
	return v1alpha1.AuthProviderConfig{Name: name, Type: v1alpha1.AuthProviderType{Name: typ}, Config: config}
}

// putSecret creates or replaces a Secret in the registry.
func putSecret(t testing.TB, ns, name string, annotations map[string]string, data map[string][]byte) {
	t.Helper()
	secrets := kubeClient(t, registry).CoreV1().Secrets(ns)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}, Data: data}
	if _, err := secrets.Create(testContext(t), s, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(testContext(t), s, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}

func pinnedTo(servers ...string) map[string]string {
	return map[string]string{v1alpha1.ServersAnnotation: strings.Join(servers, ",")}
}

// newResolver is a Resolver that reads Secrets from the registry as an admin would.
func newResolver(t testing.TB, opts ResolverOptions) *Resolver {
	t.Helper()
	if opts.Secrets == nil && registry != nil { // pure policy tests under -short read no Secret
		opts.Secrets = SecretsFromClient(kubeClient(t, registry))
	}
	if !opts.ClientIP.IsValid() {
		opts.ClientIP = testClientIP
	}
	r, err := NewResolver(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// useMember calls the member's /version and lists ConfigMaps in a namespace with the Resolved, as a
// tool would.
func useMember(ctx context.Context, a *Resolved) error {
	kube, err := kubernetes.NewForConfigAndClient(a.Config, a.HTTPClient)
	if err != nil {
		return err
	}
	v, err := kube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("GET /version: %w", err)
	}
	if v.GitVersion != member.Version {
		return fmt.Errorf("member reports version %q, want %q", v.GitVersion, member.Version)
	}
	if _, err := kube.CoreV1().ConfigMaps("kube-system").List(ctx, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("listing ConfigMaps: %w", err)
	}
	return nil
}
