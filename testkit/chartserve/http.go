package chartserve

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	repo "helm.sh/helm/v4/pkg/repo/v1"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/chartrender"
)

// HTTPRepository is an HTTP chart repository over TLS, at URL(): its index.yaml and the archives
// Add put in it.
type HTTPRepository struct {
	Server *httptest.Server
	// Requests counts the requests it heard.
	Requests atomic.Int64
	// Handle, when set, answers a request first; returning false lets the repository answer.
	Handle func(w http.ResponseWriter, r *http.Request) bool

	mu         sync.Mutex
	charts     map[string][]byte
	index      *repo.IndexFile
	user, pass string
}

// NewHTTPRepository starts one, stopped when the test ends.
func NewHTTPRepository(t testing.TB) *HTTPRepository {
	h := &HTTPRepository{charts: map[string][]byte{}, index: repo.NewIndexFile()}
	h.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Requests.Add(1)
		h.mu.Lock()
		user, pass, handle := h.user, h.pass, h.Handle
		h.mu.Unlock()
		if user != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != user || p != pass {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if handle != nil && handle(w, r) {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if r.URL.Path == "/charts/index.yaml" {
			b, err := yaml.Marshal(h.index)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Write(b)
			return
		}
		if b, ok := h.charts[strings.TrimPrefix(r.URL.Path, "/charts/")]; ok {
			w.Write(b)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(h.Server.Close)
	return h
}

// URL is the repository's URL (its index is URL()/index.yaml).
func (h *HTTPRepository) URL() string { return h.Server.URL + "/charts" }

// RootCAs trust the repository's certificate.
func (h *HTTPRepository) RootCAs() *x509.CertPool { return rootCAs(h.Server) }

// RequireBasicAuth makes the repository want these credentials from now on.
func (h *HTTPRepository) RequireBasicAuth(user, pass string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.user, h.pass = user, pass
}

// Add puts a packaged chart in the repository as NAME-VERSION.tgz and lists it in the index with
// its digest, at url (relative to the repository when empty).
func (h *HTTPRepository) Add(t testing.TB, archive []byte, url string) {
	t.Helper()
	ch, err := chartrender.Load(archive)
	if err != nil {
		t.Fatalf("chartserve: %v", err)
	}
	file := fmt.Sprintf("%s-%s.tgz", ch.Name(), ch.Version())
	sum := sha256.Sum256(archive)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.charts[file] = archive
	if err := h.index.MustAdd(&chart.Metadata{APIVersion: "v2", Name: ch.Name(), Version: ch.Version()}, file, "", hex.EncodeToString(sum[:])); err != nil {
		t.Fatalf("chartserve: %v", err)
	}
	if url != "" {
		vs := h.index.Entries[ch.Name()]
		vs[len(vs)-1].URLs = []string{url}
	}
	h.index.SortEntries()
}

// Replace serves archive for file (NAME-VERSION.tgz) without changing the index: a repository
// whose chart is not the one its index names.
func (h *HTTPRepository) Replace(file string, archive []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.charts[file] = archive
}
