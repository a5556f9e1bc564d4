package boundtoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A token is revoked by deleting the object it is bound to: the member's API server refuses a
// bound token once its object is gone. Tokens that join issues and that the Rotator renews are
// each bound to a Secret of their own, made for that purpose (no data, labelled BindingLabel) in
// the service account's namespace, and a renewal deletes the Secret of the token it replaces.
//
// That namespace must be the account's own (join makes one per account): the account may make
// Secrets there, and a Secret of type kubernetes.io/service-account-token gets a token of any
// account of its namespace. In a namespace that holds only the account (and the namespace's
// powerless default account), that gives it nothing it could not have asked for already.

// fieldManager owns the binding Secrets it makes on members: the rotation's name, since renewals
// made most of them before this package was its own.
const fieldManager = "clusterregistry-rotation"

// BindingLabel marks the Secrets, on a member, that tokens are bound to.
const BindingLabel = v1alpha1.GroupName + "/token-binding"

// Rules are what a service account needs, in a namespace of its own, to renew its own tokens
// bound to Secrets, and nothing else: ask for tokens of itself; make, list and delete the Secrets
// of its namespace that its tokens are bound to. Give them to it in a Role of that namespace.
func Rules(account string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"}, ResourceNames: []string{account}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "list", "delete"}},
	}
}

// Issue asks the member for a token of the service account namespace/name, valid for ttl (the
// member may shorten it), bound to a new Secret of that namespace: deleting the Secret revokes
// the token (Revoke). core acts on the member: as an administrator (join), or as the account
// itself with the current token (renewal). If no token is issued, the Secret is deleted again.
func Issue(ctx context.Context, core corev1client.CoreV1Interface, namespace, name string, ttl time.Duration) (*authenticationv1.TokenRequestStatus, error) {
	secrets := core.Secrets(namespace)
	binding, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "token-binding-",
			Labels:       map[string]string{BindingLabel: "true"},
			Annotations:  map[string]string{v1alpha1.ServiceAccountAnnotation: namespace + "/" + name},
		},
		Type: corev1.SecretTypeOpaque,
	}, metav1.CreateOptions{FieldManager: fieldManager})
	if err != nil {
		return nil, fmt.Errorf("making the Secret to bind a token of %s/%s to: %w", namespace, name, err)
	}
	seconds := int64(ttl.Seconds())
	tr, err := core.ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &seconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: binding.Name, UID: binding.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		cleanup, cancel := detached(ctx, cleanupTimeout)
		defer cancel()
		_ = secrets.Delete(cleanup, binding.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(binding.UID))})
		return nil, fmt.Errorf("asking for a token of %s/%s: %w", namespace, name, err)
	}
	return &tr.Status, nil
}

// Revoke deletes the Secrets of namespace that tokens of the account namespace/name are bound
// to, but the one that keep (a token) is bound to: every other token of the account that Issue
// gave stops working. Tokens not bound to a Secret are not touched; they stop working when they
// expire or the account is deleted. It returns how many it deleted.
func Revoke(ctx context.Context, core corev1client.CoreV1Interface, namespace, name, keep string) (int, error) {
	kept := BoundSecret(keep)
	secrets := core.Secrets(namespace)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: BindingLabel + "=true"})
	if err != nil {
		return 0, fmt.Errorf("listing the Secrets that tokens of %s/%s are bound to: %w", namespace, name, err)
	}
	deleted := 0
	var errs []error
	for _, s := range list.Items {
		if s.Name == kept || s.Annotations[v1alpha1.ServiceAccountAnnotation] != namespace+"/"+name {
			continue
		}
		err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(s.UID))})
		switch {
		case err == nil:
			deleted++
		case !apierrors.IsNotFound(err) && !apierrors.IsConflict(err):
			errs = append(errs, fmt.Errorf("deleting Secret %s/%s, which a replaced token is bound to: %w", namespace, s.Name, err))
		}
	}
	return deleted, errors.Join(errs...)
}

// BoundSecret is the name of the Secret that a service-account token says it is bound to, read
// from its claims without checking its signature (the member checks it), or "" if it is not
// bound to a Secret.
func BoundSecret(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Kubernetes struct {
			Secret struct {
				Name string `json:"name"`
			} `json:"secret"`
		} `json:"kubernetes.io"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return ""
	}
	return claims.Kubernetes.Secret.Name
}

// cleanupTimeout bounds the deletion of a binding nobody will use: it runs after the caller's
// context may have ended, and a member that does not answer must not hold the caller forever.
const cleanupTimeout = 30 * time.Second

// detached is a context that outlives ctx's cancellation (a cleanup must run even when the
// work it cleans up after was cancelled), keeping its values, and ends after timeout.
func detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}
