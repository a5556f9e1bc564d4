package callerauth

import (
	"cmp"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
)

// Options say how callers are checked.
type Options struct {
	// ClientCA is a PEM bundle of the CAs whose client certificates identify callers, by their
	// common name and organizations as the registry's x509 authentication reads them. Empty:
	// bearer tokens only.
	ClientCA []byte
	// CacheTTL is how long the registry's answers about a caller are kept (who a token is, what a
	// user may do), as kube-rbac-proxy and aggregated API servers keep them; default 10s.
	CacheTTL time.Duration
}

// Checker is a server's authenticator and authorizer of its callers, both asking the registry.
type Checker struct {
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
}

// New asks the registry that kube reaches about callers.
func New(kube kubernetes.Interface, opts Options) (*Checker, error) {
	ttl := cmp.Or(opts.CacheTTL, 10*time.Second)
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	authnConfig := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  kube.AuthenticationV1(),
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &backoff,
		CacheTTL:                 ttl,
	}
	if len(opts.ClientCA) > 0 {
		ca, err := dynamiccertificates.NewStaticCAContent("client-ca", opts.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("the client CA bundle: %w", err)
		}
		authnConfig.ClientCertificateCAContentProvider = ca
	}
	authn, _, err := authnConfig.New()
	if err != nil {
		return nil, err
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		AllowCacheTTL:             ttl,
		DenyCacheTTL:              ttl,
		WebhookRetryBackoff:       &backoff,
	}.New()
	if err != nil {
		return nil, err
	}
	return &Checker{Authenticator: authn, Authorizer: authz}, nil
}
