package chartrepo_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cluster-registry/sdk/chartrender"
	"github.com/cluster-registry/sdk/chartrepo"
	"github.com/cluster-registry/sdk/testkit/chartserve"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// packagedChart is a small chart of that name and version.
func packagedChart(t testing.TB, name, version string) []byte {
	t.Helper()
	b, err := chartrender.Package(name, map[string]string{
		"Chart.yaml":               fmt.Sprintf("apiVersion: v2\nname: %s\nversion: %s\n", name, version),
		"values.yaml":              "greeting: hello\n",
		"templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  greeting: {{ .Values.greeting }}\n",
	})
	require.NoError(t, err)
	return b
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func fetcherFor(roots *x509.CertPool) *chartrepo.Fetcher {
	return chartrepo.NewFetcher(chartrepo.Options{RootCAs: roots, Timeout: 20 * time.Second})
}

// add is chartserve's Add of a new small chart, returning its archive.
func add(t *testing.T, h *chartserve.HTTPRepository, name, version, url string) []byte {
	b := packagedChart(t, name, version)
	h.Add(t, b, url)
	return b
}

func TestHTTPRepositoryVersionsAndDigests(t *testing.T) {
	h := chartserve.NewHTTPRepository(t)
	v1 := add(t, h, "web", "1.0.0", "")
	v12 := add(t, h, "web", "1.2.0", "")
	add(t, h, "web", "2.0.0-rc.1", "")
	f := fetcherFor(h.RootCAs())
	ctx := context.Background()

	// The newest stable version, a range, an exact version: each with the index's digest.
	for _, c := range []struct {
		version, want string
		archive       []byte
	}{{"", "1.2.0", v12}, {"~1.0", "1.0.0", v1}, {"1.0.0", "1.0.0", v1}, {"^1", "1.2.0", v12}} {
		ch, err := f.Fetch(ctx, chartrepo.Source{URL: h.URL(), Chart: "web", Version: c.version})
		require.NoError(t, err, c.version)
		require.Equal(t, c.want, ch.Version, c.version)
		require.Equal(t, digestOf(c.archive), ch.Digest)
		require.Equal(t, c.archive, ch.Archive)
		loaded, err := chartrender.Load(ch.Archive)
		require.NoError(t, err)
		require.Equal(t, c.want, loaded.Version())
	}
	// Two versions, two downloads: the same chart asked for again (through another range) is
	// the one kept.
	require.EqualValues(t, 2, f.Downloads())

	// A pin that is not the chart's digest refuses it, naming both.
	_, err := f.Fetch(ctx, chartrepo.Source{URL: h.URL(), Chart: "web", Version: "1.2.0", Digest: digestOf(v1)})
	require.ErrorIs(t, err, chartrepo.ErrDigest)
	require.ErrorContains(t, err, digestOf(v12))

	_, err = f.Fetch(ctx, chartrepo.Source{URL: h.URL(), Chart: "nope"})
	require.ErrorIs(t, err, chartrepo.ErrNotFound)
	require.ErrorContains(t, err, `no chart "nope"`)
	_, err = f.Fetch(ctx, chartrepo.Source{URL: h.URL(), Chart: "web", Version: ">=3"})
	require.ErrorIs(t, err, chartrepo.ErrNotFound)
}

// The repository serves, for a version, an archive other than the one its index names: refused.
func TestHTTPRepositoryDigestMismatch(t *testing.T) {
	h := chartserve.NewHTTPRepository(t)
	add(t, h, "web", "1.0.0", "")
	h.Replace("web-1.0.0.tgz", packagedChart(t, "web", "1.0.0-changed"))
	_, err := fetcherFor(h.RootCAs()).Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web"})
	require.ErrorIs(t, err, chartrepo.ErrDigest)
}

// Requests go only to the repository named: a redirect is refused and not followed, and so is a
// chart that the index places on another host; the other host hears nothing, credentials
// included.
func TestHTTPRepositoryGoesNowhereElse(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		w.Write([]byte("apiVersion: v1\nentries: {}\n"))
	}))
	defer other.Close()

	h := chartserve.NewHTTPRepository(t)
	h.RequireBasicAuth("reader", "s3cret-password")
	creds := &chartrepo.Credentials{Username: "reader", Password: "s3cret-password"}
	add(t, h, "web", "1.0.0", other.URL+"/web-1.0.0.tgz")
	f := fetcherFor(h.RootCAs())
	_, err := f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web", Credentials: creds})
	require.ErrorIs(t, err, chartrepo.ErrOtherHost)
	require.ErrorContains(t, err, other.URL+"/web-1.0.0.tgz")

	h.Handle = func(w http.ResponseWriter, r *http.Request) bool {
		http.Redirect(w, r, other.URL+"/charts/index.yaml?token=abc", http.StatusFound)
		return true
	}
	_, err = f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web", Version: "1.0.0", Credentials: creds})
	require.ErrorIs(t, err, chartrepo.ErrRedirect)
	require.ErrorContains(t, err, other.URL+"/charts/index.yaml")
	require.NotContains(t, err.Error(), "token=abc", "a redirect's query may hold a token")
	require.NotContains(t, err.Error(), "s3cret-password")
	require.Zero(t, elsewhere.Load(), "the other host was asked")
}

// Credentials: without them the repository's refusal says where to put them; with them it
// serves. Plain HTTP is refused unless allowed.
func TestHTTPRepositoryCredentialsAndPlainHTTP(t *testing.T) {
	h := chartserve.NewHTTPRepository(t)
	h.RequireBasicAuth("reader", "s3cret-password")
	add(t, h, "web", "1.0.0", "")
	f := fetcherFor(h.RootCAs())
	_, err := f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web"})
	require.ErrorContains(t, err, "401")
	require.ErrorContains(t, err, "secretRef")
	ch, err := f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web", Credentials: &chartrepo.Credentials{Username: "reader", Password: "s3cret-password"}})
	require.NoError(t, err)
	require.Equal(t, "1.0.0", ch.Version)

	// The chart fetched with credentials is not handed to a Source without them, even one that
	// pins its digest.
	_, err = f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web", Version: "1.0.0", Digest: ch.Digest})
	require.ErrorContains(t, err, "401")

	_, err = f.Fetch(context.Background(), chartrepo.Source{URL: strings.Replace(h.URL(), "https://", "http://", 1), Chart: "web"})
	require.ErrorIs(t, err, chartrepo.ErrPlainHTTP)
}

// With Options.Hosts, a repository elsewhere is not asked anything.
func TestOnlyTheHostsAllowed(t *testing.T) {
	h := chartserve.NewHTTPRepository(t)
	add(t, h, "web", "1.0.0", "")
	host := strings.TrimPrefix(h.Server.URL, "https://")
	f := chartrepo.NewFetcher(chartrepo.Options{RootCAs: h.RootCAs(), Hosts: []string{"charts.example.com", "127.0.0.1"}})
	_, err := f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web"})
	require.ErrorIs(t, err, chartrepo.ErrHostNotAllowed)
	require.ErrorContains(t, err, host)
	require.Zero(t, h.Requests.Load())

	f = chartrepo.NewFetcher(chartrepo.Options{RootCAs: h.RootCAs(), Hosts: []string{"charts.example.com", host}})
	_, err = f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web"})
	require.NoError(t, err)
}

// A chart over the limit, announced or not, and an index that never ends, are refused without
// reading them whole.
func TestHTTPRepositoryBoundsWhatItReads(t *testing.T) {
	h := chartserve.NewHTTPRepository(t)
	add(t, h, "web", "1.0.0", "")
	var streamed atomic.Int64
	endless := func(w http.ResponseWriter) {
		chunk := make([]byte, 64<<10)
		for i := 0; i < 4096; i++ { // up to 256 MiB, unless the reader stops first
			if _, err := w.Write(chunk); err != nil {
				return
			}
			streamed.Add(int64(len(chunk)))
		}
	}
	h.Handle = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.HasSuffix(r.URL.Path, ".tgz") {
			endless(w)
			return true
		}
		return false
	}
	f := fetcherFor(h.RootCAs())
	_, err := f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web"})
	require.ErrorIs(t, err, chartrepo.ErrTooLarge)
	h.Handle = func(w http.ResponseWriter, r *http.Request) bool { endless(w); return true }
	f = chartrepo.NewFetcher(chartrepo.Options{RootCAs: h.RootCAs(), MaxIndexBytes: 1 << 20})
	_, err = f.Fetch(context.Background(), chartrepo.Source{URL: h.URL(), Chart: "web"})
	require.ErrorIs(t, err, chartrepo.ErrTooLarge)
	require.Less(t, streamed.Load(), int64(64<<20), "the answers were read far past their limits")
	require.False(t, errors.Is(err, chartrepo.ErrDigest))
}
