package access_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
