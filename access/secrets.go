package access

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// SecretGetter reads Secrets from the registry's cluster with the caller's own permissions. The
// Resolver reads a Secret when it first resolves a Cluster and again each time it revalidates.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
}

// SecretGetterFunc adapts a function to SecretGetter.
type SecretGetterFunc func(ctx context.Context, namespace, name string) (*corev1.Secret, error)

// GetSecret calls f.
func (f SecretGetterFunc) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return f(ctx, namespace, name)
}

// SecretsFromClient reads each Secret with a GET through client: simple, and right for tools that
// resolve a few Clusters now and then.
func SecretsFromClient(client kubernetes.Interface) SecretGetter {
	return SecretGetterFunc(func(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
		return client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	})
}

// SecretsFromLister reads Secrets from an informer's cache: right for controllers, which keep
// many Clusters resolved and revalidate them often.
func SecretsFromLister(lister corev1listers.SecretLister) SecretGetter {
	return SecretGetterFunc(func(_ context.Context, namespace, name string) (*corev1.Secret, error) {
		return lister.Secrets(namespace).Get(name)
	})
}
