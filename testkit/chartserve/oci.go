package chartserve

import (
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
	helmregistry "helm.sh/helm/v4/pkg/registry"

	"github.com/cluster-registry/sdk/chartrender"
)

// OCIRegistry is an OCI registry over TLS. Once RequireToken is called it wants a bearer token,
// which its token service (its own /token, or the realm SetRealm names) gives for the basic
// credentials named.
type OCIRegistry struct {
	Server *httptest.Server
	// Requests counts the requests it heard.
	Requests atomic.Int64

	mu          sync.Mutex
	user, pass  string
	realm       string
	bearerToken string
}

// NewOCIRegistry starts one, stopped when the test ends.
func NewOCIRegistry(t testing.TB) *OCIRegistry {
	o := &OCIRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	o.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.Requests.Add(1)
		o.mu.Lock()
		user, pass, realm, token := o.user, o.pass, o.realm, o.bearerToken
		o.mu.Unlock()
		if user != "" {
			if r.URL.Path == "/token" {
				if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.Write([]byte(`{"token":"` + token + `"}`))
				return
			}
			if r.Header.Get("Authorization") != "Bearer "+token {
				if realm == "" {
					realm = o.Server.URL + "/token"
				}
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`",service="chartserve",scope="repository:charts:pull"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(o.Server.Close)
	return o
}

// Host is the registry's host:port.
func (o *OCIRegistry) Host() string { return strings.TrimPrefix(o.Server.URL, "https://") }

// RootCAs trust the registry's certificate.
func (o *OCIRegistry) RootCAs() *x509.CertPool { return rootCAs(o.Server) }

// Push pushes a packaged chart to charts/NAME:VERSION with Helm's registry client, as helm push
// does, and returns its oci:// URL (without the version). Push before RequireToken.
func (o *OCIRegistry) Push(t testing.TB, archive []byte) string {
	t.Helper()
	ch, err := chartrender.Load(archive)
	if err != nil {
		t.Fatalf("chartserve: %v", err)
	}
	c, err := helmregistry.NewClient(helmregistry.ClientOptHTTPClient(o.Server.Client()), helmregistry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatalf("chartserve: %v", err)
	}
	if _, err := c.Push(archive, o.Host()+"/charts/"+ch.Name()+":"+ch.Version()); err != nil {
		t.Fatalf("chartserve: pushing %s %s: %v", ch.Name(), ch.Version(), err)
	}
	return "oci://" + o.Host() + "/charts/" + ch.Name()
}

// RequireToken makes the registry want a bearer token from now on, which its token service
// gives for user and pass.
func (o *OCIRegistry) RequireToken(user, pass string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.user, o.pass, o.bearerToken = user, pass, "tok-"+user
}

// SetRealm names the token service the registry's challenges point at ("" is its own).
func (o *OCIRegistry) SetRealm(realm string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.realm = realm
}

func rootCAs(srv *httptest.Server) *x509.CertPool {
	return srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
}
