package main

import (
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// On a machine with no CA certificates (the image's empty base), the command still verifies a
// public root: ISRG Root X1, which signs Let's Encrypt's certificates. Run in a child process,
// because Go reads the system's roots once, with SSL_CERT_FILE and SSL_CERT_DIR naming nothing.
func TestVerifiesPublicRootsWithoutSystemRoots(t *testing.T) {
	if os.Getenv("CLUSTERREGISTRY_TEST_NO_SYSTEM_ROOTS") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestVerifiesPublicRootsWithoutSystemRoots$", "-test.count=1")
		missing := t.TempDir() + "/none"
		cmd.Env = append(os.Environ(), "CLUSTERREGISTRY_TEST_NO_SYSTEM_ROOTS=1", "SSL_CERT_FILE="+missing, "SSL_CERT_DIR="+missing)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "without system roots:\n%s", out)
		return
	}
	b, err := os.ReadFile("testdata/isrg-root-x1.pem")
	require.NoError(t, err)
	block, _ := pem.Decode(b)
	require.NotNil(t, block)
	root, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	pool, err := x509.SystemCertPool()
	require.NoError(t, err)
	_, err = root.Verify(x509.VerifyOptions{Roots: pool})
	require.NoError(t, err, "a public root, with no system roots")
}
