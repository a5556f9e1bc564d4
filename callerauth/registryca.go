package callerauth

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The ConfigMap in which a kube-apiserver publishes the CAs it trusts for client certificates,
// as aggregated API servers read them (the extension-apiserver-authentication-reader Role in
// kube-system grants reading it).
const (
	authConfigMapNamespace = "kube-system"
	authConfigMapName      = "extension-apiserver-authentication"
	clientCAKey            = "client-ca-file"
)

// RegistryClientCA is the PEM bundle of the CAs whose client certificates the registry's API
// server accepts, as it publishes them. An error says what to grant, or what to give instead.
func RegistryClientCA(ctx context.Context, kube kubernetes.Interface) ([]byte, error) {
	cm, err := kube.CoreV1().ConfigMaps(authConfigMapNamespace).Get(ctx, authConfigMapName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the registry's client CA (ConfigMap %s/%s; the Role extension-apiserver-authentication-reader there grants it): %w",
			authConfigMapNamespace, authConfigMapName, err)
	}
	ca := cm.Data[clientCAKey]
	if ca == "" {
		return nil, fmt.Errorf("ConfigMap %s/%s has no %s: the registry's API server accepts no client certificates", authConfigMapNamespace, authConfigMapName, clientCAKey)
	}
	return []byte(ca), nil
}
