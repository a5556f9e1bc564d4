package access

import (
	"context"
	"net/url"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// A Provider turns one kind of auth provider pointer into credentials. The built-in providers
// cover the well-known types; tool authors register their own with ResolverOptions.Providers.
//
// A Provider must treat the Request as read-only, and must return new values in Credentials each
// time, never slices or maps shared with the Cluster or with other calls: one Cluster's resolution
// must not change another's.
type Provider interface {
	Credentials(ctx context.Context, req *Request) (*Credentials, error)
}

// ProviderFunc adapts a function to Provider.
type ProviderFunc func(ctx context.Context, req *Request) (*Credentials, error)

// Credentials calls f.
func (f ProviderFunc) Credentials(ctx context.Context, req *Request) (*Credentials, error) {
	return f(ctx, req)
}

// Credentials is what a Provider found: how to authenticate to the member, and any trust it
// carries. Set one way to authenticate.
type Credentials struct {
	// BearerToken is sent as "Authorization: Bearer".
	BearerToken string
	// TokenFile is a file holding a bearer token, reread as it changes (a projected token).
	TokenFile string
	// CertData and KeyData are a PEM client certificate and key.
	CertData, KeyData []byte
	// Exec runs a client.authentication.k8s.io plugin for credentials.
	Exec *clientcmdapi.ExecConfig

	// CAData is the CA that came with the credentials (a Secret's ca.crt, a kubeconfig's CA).
	// When set, it alone verifies the member: the Cluster's caBundle, which the Cluster's editor
	// controls, serves only credentials that carry no CA.
	CAData []byte
	// TLSServerName overrides the name the member's certificate is checked against.
	TLSServerName string

	// Revision identifies the version of the inputs behind these credentials that the fields above
	// do not show, such as the content of a token file. When it or any field changes, clients are
	// rebuilt; while all stay the same, the same config and transport are kept.
	Revision string
}

// Request is what a Provider gets to resolve one of a Cluster's auth providers.
type Request struct {
	// Cluster is the Cluster being resolved.
	Cluster *v1alpha1.Cluster
	// Provider is the auth provider entry to resolve.
	Provider *v1alpha1.AuthProviderConfig
	// Server is the member's API server as selected from the Cluster's endpoints: where the
	// credentials will be sent.
	Server *url.URL

	resolver *Resolver
}

// Config returns the provider's config value for key, or def when it is unset or empty.
func (r *Request) Config(key, def string) string {
	if v := r.Provider.Config[key]; v != "" {
		return v
	}
	return def
}
