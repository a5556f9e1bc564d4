package access_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/cluster-registry/sdk/access"
)

func TestExpiry(t *testing.T) {
	enc := base64.RawURLEncoding.EncodeToString
	token := enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(`{"iat":1700000000,"exp":1700003600}`)) + ".sig"
	issued, expires, ok := access.Expiry(&rest.Config{BearerToken: token})
	require.True(t, ok)
	require.Equal(t, time.Unix(1700000000, 0), issued)
	require.Equal(t, time.Unix(1700003600, 0), expires)

	resolved := &access.Resolved{Config: &rest.Config{BearerToken: token}}
	for range 2 { // read once, answered alike after
		i, e, ok := resolved.Expiry()
		require.True(t, ok)
		require.Equal(t, issued, i)
		require.Equal(t, expires, e)
	}

	_, _, ok = access.Expiry(&rest.Config{BearerToken: "opaque-token"})
	require.False(t, ok, "an opaque token says nothing")
	_, _, ok = access.Expiry(&rest.Config{BearerTokenFile: "/var/run/token"})
	require.False(t, ok, "a token file is read at request time")

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	notBefore, notAfter := time.Unix(1700000000, 0).UTC(), time.Unix(1700086400, 0).UTC()
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "me"},
		NotBefore: notBefore, NotAfter: notAfter}, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "me"}}, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	issued, expires, ok = access.Expiry(&rest.Config{TLSClientConfig: rest.TLSClientConfig{
		CertData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyData:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}})
	require.True(t, ok)
	require.Equal(t, notBefore, issued.UTC())
	require.Equal(t, notAfter, expires.UTC())
}

// A token's claims are its writer's choice. Whatever they say, what TokenExpiry returns is a time
// that an API object can carry and every client read back (RFC 3339), or zero: a claim no time
// field can hold would fail the status write it goes into.
func TestTokenExpiryOfClaimsNoTimeFieldHolds(t *testing.T) {
	token := func(claims string) string {
		enc := base64.RawURLEncoding.EncodeToString
		return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(claims)) + ".sig"
	}
	for _, tc := range []struct {
		claims          string
		issued, expires int64 // Unix seconds; 0 for none
	}{
		{claims: `{"iat":1700000000,"exp":1700003600}`, issued: 1700000000, expires: 1700003600},
		{claims: `{"iat":1700000000.25,"exp":1700003600.75}`, issued: 1700000000, expires: 1700003600}, // RFC 7519 allows a fraction
		{claims: `{"exp":253402300799}`, expires: 253402300799},                                        // 9999-12-31T23:59:59Z
		{claims: `{"iat":1700000000,"exp":253402300800}`, issued: 1700000000},                          // the year 10000
		{claims: `{"exp":1000000000000000}`},
		{claims: `{"exp":1e300}`},
		{claims: `{"iat":-5,"exp":-1}`},
		{claims: `{"exp":"1700003600"}`},
	} {
		issued, expires := access.TokenExpiry(token(tc.claims))
		require.Equal(t, tc.issued, unixOrZero(issued), "iat of %s", tc.claims)
		require.Equal(t, tc.expires, unixOrZero(expires), "exp of %s", tc.claims)
	}
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// FuzzTokenExpiry: no token makes TokenExpiry panic or return a time that an API object's time
// field cannot carry back to its reader.
func FuzzTokenExpiry(f *testing.F) {
	enc := base64.RawURLEncoding.EncodeToString
	for _, claims := range []string{`{"iat":1700000000,"exp":1700003600}`, `{"exp":1000000000000000}`, `{"exp":253402300799.9}`, `{}`, `[]`} {
		f.Add("e30." + enc([]byte(claims)) + ".c2ln")
	}
	f.Add("opaque")
	f.Fuzz(func(t *testing.T, token string) {
		issued, expires := access.TokenExpiry(token)
		for _, at := range []time.Time{issued, expires} {
			if at.IsZero() {
				continue
			}
			data, err := json.Marshal(metav1.NewTime(at))
			require.NoError(t, err)
			var back metav1.Time
			require.NoError(t, json.Unmarshal(data, &back), "%s does not read back", data)
			require.Equal(t, at.Unix(), back.Unix())
		}
	})
}
