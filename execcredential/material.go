package execcredential

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1 "k8s.io/client-go/pkg/apis/clientauthentication/v1"
	"k8s.io/client-go/transport"

	"github.com/cluster-registry/sdk/access"
)

// material is what the resolved config would authenticate with: a bearer token or a client
// certificate, with when it expires. It asks client-go rather than reading the config's fields,
// so that every way a provider may give credentials (a token, a token file, certificate data, an
// exec plugin of the reader's) comes out the same: it sends one request through the config's own
// authentication wrappers to a round tripper that only looks at it, never to the network.
func material(ctx context.Context, a *access.Resolved) (*clientauthv1.ExecCredentialStatus, error) {
	tc, err := a.Config.TransportConfig()
	if err != nil {
		return nil, err
	}
	var authorization string
	rt, err := transport.HTTPWrappersForConfig(tc, roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		authorization = r.Header.Get("Authorization")
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	}))
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.Server.String()+"/version", nil)
	if err != nil {
		return nil, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("getting the credentials: %w", err)
	}
	_ = resp.Body.Close()

	limit := time.Now().Add(MaxLifetime)
	if token, ok := strings.CutPrefix(authorization, "Bearer "); ok && token != "" {
		return &clientauthv1.ExecCredentialStatus{Token: token, ExpirationTimestamp: expiry(limit, tokenExpiry(token))}, nil
	}
	var cert *tls.Certificate
	switch {
	case len(tc.TLS.CertData) > 0:
		c, err := tls.X509KeyPair(tc.TLS.CertData, tc.TLS.KeyData)
		if err != nil {
			return nil, errors.New("the client certificate and key do not make a pair")
		}
		cert = &c
	case tc.TLS.GetCertHolder != nil && tc.TLS.GetCertHolder.GetCert != nil:
		if cert, err = tc.TLS.GetCertHolder.GetCert(); err != nil {
			return nil, fmt.Errorf("getting the client certificate: %w", err)
		}
	}
	if cert == nil || len(cert.Certificate) == 0 {
		return nil, errors.New("the credentials are neither a bearer token nor a client certificate, which is all an exec plugin can give kubectl")
	}
	var certPEM []byte
	for _, der := range cert.Certificate {
		certPEM = append(certPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return nil, errors.New("the client key is of a kind that cannot be passed on")
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, errors.New("the client certificate does not parse")
	}
	return &clientauthv1.ExecCredentialStatus{
		ClientCertificateData: string(certPEM),
		ClientKeyData:         string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})),
		ExpirationTimestamp:   expiry(limit, leaf.NotAfter),
	}, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// expiry is the earlier of limit and the credential's own expiry, when it has one.
func expiry(limit, own time.Time) *metav1.Time {
	if !own.IsZero() && own.Before(limit) {
		limit = own
	}
	return &metav1.Time{Time: limit.Truncate(time.Second)}
}

// tokenExpiry is a JWT's exp claim, or zero for a token that is not a JWT or has none. It does
// not verify the token; it only keeps kubectl from using one past its own expiry.
func tokenExpiry(token string) time.Time {
	_, expires := access.TokenExpiry(token)
	return expires
}
