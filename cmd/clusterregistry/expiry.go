package main

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// tokenExpiries reads when the tokens that join stored expire, for get and describe: each
// namespace's Secrets with one list, rather than one request per Cluster. A token is read only to
// decode its expiry claim; it is never printed or kept.
type tokenExpiries struct {
	kube kubernetes.Interface
	// byNamespace is each namespace's Secrets' expiries, by Secret name; nil for a namespace
	// whose Secrets the caller may not list.
	byNamespace map[string]map[string]time.Time
}

func newTokenExpiries(kube kubernetes.Interface) *tokenExpiries {
	return &tokenExpiries{kube: kube, byNamespace: map[string]map[string]time.Time{}}
}

// credential names the provider a reader would try first and, for a secret provider whose
// Secret holds a service-account token (as join stores it), when that token expires: "in 5h" or
// "expired 3m ago". Where the caller may not read the Secret, or the credential carries no expiry,
// the expiry is "-".
func (e *tokenExpiries) credential(ctx context.Context, c *v1alpha1.Cluster, now time.Time) (string, string) {
	if len(c.Spec.AuthInfo.Providers) == 0 {
		return "none", "-"
	}
	p := c.Spec.AuthInfo.Providers[0]
	exp, ok := e.of(ctx, c, p)
	if !ok {
		return p.Type.Name, "-"
	}
	return p.Type.Name, relative(exp, now)
}

// of is when the token of provider p of Cluster c expires, if p is a secret provider whose Secret
// the caller may read and whose token says.
func (e *tokenExpiries) of(ctx context.Context, c *v1alpha1.Cluster, p v1alpha1.AuthProviderConfig) (time.Time, bool) {
	ref, ok := access.SecretOf(c, p)
	if !ok || p.Type.Name != v1alpha1.ProviderTypeSecret {
		return time.Time{}, false
	}
	namespace := ref.Namespace
	byName, listed := e.byNamespace[namespace]
	if !listed {
		if list, err := e.kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); err == nil {
			byName = map[string]time.Time{}
			for _, s := range list.Items {
				if _, exp := access.TokenExpiry(string(s.Data[v1alpha1.SecretTokenKey])); !exp.IsZero() { // only its exp claim is read
					byName[s.Name] = exp
				}
			}
		}
		e.byNamespace[namespace] = byName
	}
	exp, ok := byName[ref.Name]
	return exp, ok
}

// relative is t from now: "in 5h", or "expired 3m ago".
func relative(t, now time.Time) string {
	if t.Before(now) {
		return "expired " + duration.HumanDuration(now.Sub(t)) + " ago"
	}
	return "in " + duration.HumanDuration(t.Sub(now))
}
