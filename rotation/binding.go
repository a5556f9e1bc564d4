package rotation

import (
	"context"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/cluster-registry/sdk/boundtoken"
)

// The bound-token protocol moved to package boundtoken, so that join and the rotator share it
// without one controller importing another. These names stay for compatibility.

// BindingLabel marks the Secrets, on a member, that tokens are bound to.
//
// Deprecated: use boundtoken.BindingLabel.
const BindingLabel = boundtoken.BindingLabel

// Rules are what a service account needs to renew its own bound tokens.
//
// Deprecated: use boundtoken.Rules.
func Rules(account string) []rbacv1.PolicyRule { return boundtoken.Rules(account) }

// Issue asks the member for a token of namespace/name bound to a new Secret.
//
// Deprecated: use boundtoken.Issue.
func Issue(ctx context.Context, core corev1client.CoreV1Interface, namespace, name string, ttl time.Duration) (*authenticationv1.TokenRequestStatus, error) {
	return boundtoken.Issue(ctx, core, namespace, name, ttl)
}

// Revoke deletes the Secrets the account's tokens are bound to, but keep's.
//
// Deprecated: use boundtoken.Revoke.
func Revoke(ctx context.Context, core corev1client.CoreV1Interface, namespace, name, keep string) (int, error) {
	return boundtoken.Revoke(ctx, core, namespace, name, keep)
}

// BoundSecret is the name of the Secret a token says it is bound to.
//
// Deprecated: use boundtoken.BoundSecret.
func BoundSecret(token string) string { return boundtoken.BoundSecret(token) }

// detached is a context that outlives ctx's cancellation (a cleanup must run even when the
// work it cleans up after was cancelled), keeping its values, and ends after timeout.
func detached(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}
