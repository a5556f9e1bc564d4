package localfleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// fieldManager names localfleet as the writer of what it registers.
const fieldManager = "localfleet"

// tokenLifetime is long enough for any test or demo; the member's token is not rotated.
const tokenLifetime = 24 * time.Hour

// Member is a member cluster of a local fleet, registered in the registry as a Cluster of the
// same name in Fleet.Namespace.
type Member struct {
	// Server is the member's API server. Server.Config is an administrator's, for checking what
	// a tool did; tools under test should reach the member through the registry instead.
	*Server
	// Name is the member's Cluster name: member-1, member-2...
	Name string
	// ProviderType is how the Cluster points at its credentials: v1alpha1.ProviderTypeSecret (a
	// service-account token in the Secret <name>-token, pinned to the member's server) or
	// v1alpha1.ProviderTypeKubeconfigSecret (a client-certificate kubeconfig in <name>-kubeconfig).
	ProviderType string

	fleet *Fleet
}

// register gives the member credentials, stores them in a registry Secret, and creates its
// Cluster with a Ready status.
func (m *Member) register(ctx context.Context, registryKube kubernetes.Interface, registry versioned.Interface, index int, labels map[string]string) error {
	memberKube, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.fleet.Namespace}}
	var provider v1alpha1.AuthProviderConfig
	if index%2 == 0 {
		m.ProviderType = v1alpha1.ProviderTypeSecret
		token, err := adminToken(ctx, memberKube)
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
		secret.Name = m.Name + "-token"
		secret.Annotations = map[string]string{v1alpha1.ServersAnnotation: m.URL()}
		// The member's CA travels with the token, so that it alone verifies the member: a Cluster's
		// caBundle, which the Cluster's editor controls, does not.
		secret.Data = map[string][]byte{v1alpha1.SecretTokenKey: []byte(token), v1alpha1.SecretCAKey: m.Config.CAData}
		provider = v1alpha1.AuthProviderConfig{Name: "token", Config: map[string]string{"name": secret.Name}}
	} else {
		m.ProviderType = v1alpha1.ProviderTypeKubeconfigSecret
		kubeconfig, err := m.AddUser(fieldManager, "system:masters")
		if err != nil {
			return fmt.Errorf("member %s: %w", m.Name, err)
		}
		secret.Name = v1alpha1.KubeconfigSecretName(m.Name) // Cluster API's convention, the provider's default
		secret.Data = map[string][]byte{v1alpha1.KubeconfigSecretKey: kubeconfig}
		provider = v1alpha1.AuthProviderConfig{Name: "kubeconfig"}
	}
	provider.Type.Name = m.ProviderType
	if _, err := registryKube.CoreV1().Secrets(m.fleet.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("member %s: storing its credentials in the registry: %w", m.Name, err)
	}

	cluster := &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.fleet.Namespace, Labels: labels},
		Spec: v1alpha1.ClusterSpec{
			DisplayName: fmt.Sprintf("Local member %d", index+1),
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: m.URL()}},
				CABundle:        m.Config.CAData,
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{provider}},
		},
	}
	clusters := registry.ClusterregistryV1alpha1().Clusters(m.fleet.Namespace)
	created, err := clusters.Create(ctx, cluster, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("member %s: registering its Cluster: %w", m.Name, err)
	}

	if m.isolated != nil {
		return nil // nothing outside its network reaches it: status is for whatever does
	}
	version, err := memberKube.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("member %s: GET /version: %w", m.Name, err)
	}
	now := metav1.Now()
	created.Status.Version = version.GitVersion
	created.Status.LastProbeTime = &now
	created.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonReachable, Message: "started by localfleet"})
	if _, err := clusters.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldManager: fieldManager}); err != nil {
		return fmt.Errorf("member %s: writing its status: %w", m.Name, err)
	}
	return nil
}

// adminToken makes a cluster-admin service account on the member and returns a token for it.
func adminToken(ctx context.Context, kube kubernetes.Interface) (string, error) {
	const ns, name = "kube-system", "localfleet-admin"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		return "", fmt.Errorf("creating service account %s/%s: %w", ns, name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
		return "", fmt.Errorf("binding %s/%s to cluster-admin: %w", ns, name, err)
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(tokenLifetime / time.Second))}}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", ns, name, err)
	}
	return tr.Status.Token, nil
}

// Stop stops the member's API server and etcd, as an outage would. Its Cluster and Secret stay,
// so tools still try the member and must report it. With Options.MarkStopped it also records
// the outage in its Cluster (Ready False, reason Unreachable); otherwise a health controller's
// probes do. Calling Stop again does nothing.
func (m *Member) Stop() error {
	err := m.Server.Stop()
	if !m.fleet.markStopped {
		return err
	}
	select {
	case <-m.fleet.stopped:
		return err // the registry is going too
	default:
	}
	return errors.Join(err, m.markUnreachable())
}

func (m *Member) markUnreachable() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	registry, err := versioned.NewForConfig(m.fleet.Registry.Config)
	if err != nil {
		return err
	}
	clusters := registry.ClusterregistryV1alpha1().Clusters(m.fleet.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		c, err := clusters.Get(ctx, m.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		c.Status.LastProbeTime = &now
		if !c.Status.SetCondition(metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
			Reason: v1alpha1.ReasonUnreachable, Message: "stopped by localfleet"}) {
			return nil
		}
		_, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	if err != nil {
		return fmt.Errorf("member %s: recording that it stopped: %w", m.Name, err)
	}
	return nil
}
