package trustflags

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"

	"github.com/cluster-registry/sdk/tunnel"
)

// TunnelDialer is the tunnel the flags describe, or nil when --tunnel-server is not given. The
// client certificate is read again at each dial, so a renewed one is used without a restart.
func (f *Flags) TunnelDialer() (*tunnel.Dialer, error) {
	if f.TunnelServer == "" {
		if f.TunnelCA != "" || f.TunnelCert != "" || f.TunnelKey != "" {
			return nil, fmt.Errorf("--%s, --%s and --%s are for --%s, which is not given", FlagTunnelCA, FlagTunnelCert, FlagTunnelKey, FlagTunnelServer)
		}
		return nil, nil
	}
	if _, _, err := net.SplitHostPort(f.TunnelServer); err != nil {
		return nil, fmt.Errorf("--%s %q: want host:port", FlagTunnelServer, f.TunnelServer)
	}
	var missing []error
	for _, flag := range []struct{ name, value string }{{FlagTunnelCA, f.TunnelCA}, {FlagTunnelCert, f.TunnelCert}, {FlagTunnelKey, f.TunnelKey}} {
		if flag.value == "" {
			missing = append(missing, fmt.Errorf("--%s is required with --%s", flag.name, FlagTunnelServer))
		}
	}
	if len(missing) > 0 {
		return nil, errors.Join(missing...)
	}
	caPEM, err := os.ReadFile(f.TunnelCA)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", FlagTunnelCA, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--%s %s: no PEM certificate in it", FlagTunnelCA, f.TunnelCA)
	}
	if _, err := tls.LoadX509KeyPair(f.TunnelCert, f.TunnelKey); err != nil {
		// crypto/tls describes the files' shape (no PEM data, a mismatched key), never their content.
		return nil, fmt.Errorf("--%s and --%s: %w", FlagTunnelCert, FlagTunnelKey, err)
	}
	cert, key := f.TunnelCert, f.TunnelKey
	return &tunnel.Dialer{Address: f.TunnelServer, TLS: &tls.Config{
		RootCAs:    roots,
		MinVersion: tls.VersionTLS12,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, fmt.Errorf("--%s and --%s: %w", FlagTunnelCert, FlagTunnelKey, err)
			}
			return &c, nil
		},
	}}, nil
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
