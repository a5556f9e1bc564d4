package access

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"time"

	"k8s.io/client-go/rest"
)

// Expiry is when the credentials in cfg expire, as far as they say so themselves: a bearer
// token's exp claim (a JWT's, read without verifying it) or a client certificate's NotAfter.
// issued is when they were issued (the token's iat, the certificate's NotBefore), zero when they
// do not say. ok is false for credentials that carry no expiry: an opaque token, or credentials
// got at request time (a token file, an exec plugin).
func Expiry(cfg *rest.Config) (issued, expires time.Time, ok bool) {
	if cfg == nil {
		return time.Time{}, time.Time{}, false
	}
	if cfg.BearerToken != "" {
		issued, expires = TokenExpiry(cfg.BearerToken)
		return issued, expires, !expires.IsZero()
	}
	if len(cfg.CertData) > 0 {
		// The leaf is the first certificate; its key need not be parsed to know when it expires.
		block, _ := pem.Decode(cfg.CertData)
		if block == nil || block.Type != "CERTIFICATE" {
			return time.Time{}, time.Time{}, false
		}
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return time.Time{}, time.Time{}, false
		}
		return leaf.NotBefore, leaf.NotAfter, true
	}
	return time.Time{}, time.Time{}, false
}

// lastRepresentable is the last second an RFC 3339 time can name (9999-12-31T23:59:59Z): what
// the API server stores as a time, and what every client can read back.
const lastRepresentable = 253402300799

// TokenExpiry is a JWT's iat and exp claims, zero where the token is not a JWT or lacks them. It
// does not verify the token: it only tells when the token says it stops working.
//
// Whoever writes a Secret chooses its token, and its claims go where the registry and kubectl
// read them (status.credentialsExpireAt, an ExecCredential's expirationTimestamp). A claim past
// the year 9999 has no RFC 3339 form: written there, it would fail the whole status write at
// every probe and freeze what the registry says of the Cluster. So a claim that no time field
// can hold is taken as not made.
func TokenExpiry(token string) (issued, expires time.Time) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, time.Time{}
	}
	// NumericDate may have a fraction (RFC 7519, section 2); Kubernetes' own tokens have none.
	var claims struct {
		Iat float64 `json:"iat"`
		Exp float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &claims) != nil {
		return time.Time{}, time.Time{}
	}
	if claims.Iat > 0 && claims.Iat <= lastRepresentable {
		issued = time.Unix(int64(claims.Iat), 0)
	}
	if claims.Exp > 0 && claims.Exp <= lastRepresentable {
		expires = time.Unix(int64(claims.Exp), 0)
	}
	return issued, expires
}
