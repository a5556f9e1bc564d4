package chartrepo

import (
	"container/list"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/cluster-registry/sdk/chartrender"
)

// Options configure a Fetcher. The zero value fetches over TLS verified by the system's roots.
type Options struct {
	// RootCAs verify repositories' certificates; nil is the system's roots.
	RootCAs *x509.CertPool
	// AllowPlainHTTP lets http:// repositories, and OCI registries spoken to without TLS, be
	// used: for labs and tests. Off, they are refused (ErrPlainHTTP): whoever is on the path
	// could change the chart, and read the credentials.
	AllowPlainHTTP bool
	// Timeout bounds one fetch, resolving and downloading together; 60 s when zero.
	Timeout time.Duration
	// ResolveEvery is how long a version resolved from a repository (a range, the newest, or a
	// tag's digest) is used before the repository is asked again; 5 minutes when zero.
	ResolveEvery time.Duration
	// MaxIndexBytes bounds an HTTP repository's index.yaml (and an OCI manifest or tag list);
	// 16 MiB when zero.
	MaxIndexBytes int64
	// KeepCharts is how many packaged charts are kept, by digest; 64 when zero.
	KeepCharts int
	// Hosts, when set, are the only repositories' hosts (host, or host:port) fetched from: a
	// Release's writer then cannot make the controller ask anything of another host, such as a
	// service inside its network. Empty allows any.
	Hosts []string
}

// Source is a chart in a repository: what a Release's spec.source.chart.repository says, with
// the credentials its Secret gives for the repository (CredentialsFromSecret).
type Source struct {
	// URL is oci://host/path/chart, or an HTTP repository's URL (its index.yaml is under it).
	URL string
	// Chart is the chart's name in an HTTP repository's index; empty for oci://.
	Chart string
	// Version is a version or a semantic version range; the newest stable version when empty.
	Version string
	// Digest, when set, pins the packaged chart ("sha256:" and 64 hex digits).
	Digest string
	// Credentials are sent to the repository's host, and nowhere else; nil is anonymous.
	Credentials *Credentials
}

// Chart is a packaged chart as fetched.
type Chart struct {
	// Archive is the packaged chart (a gzipped tar), at most chartrender.MaxArchiveBytes. It is
	// shared: callers do not change it.
	Archive []byte
	// Version is the version the Source resolved to.
	Version string
	// Digest is "sha256:" and the archive's SHA-256.
	Digest string
}

// A Fetcher fetches charts from repositories and keeps them by digest. It is safe for concurrent
// use; one per process is enough.
type Fetcher struct {
	opts  Options
	base  *http.Transport
	group singleflight.Group

	mu       sync.Mutex
	resolved map[string]resolution
	charts   map[string]*list.Element // by digest and credentials; values are *kept
	order    *list.List               // most recently used first

	downloads atomic.Int64
}

// resolution is a Source resolved: the version, the digest when the repository names one, and
// where the archive is.
type resolution struct {
	version, digest, location string
	at                        time.Time
}

type kept struct {
	key   string
	chart *Chart
}

// NewFetcher makes a Fetcher.
func NewFetcher(opts Options) *Fetcher {
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	if opts.ResolveEvery <= 0 {
		opts.ResolveEvery = 5 * time.Minute
	}
	if opts.MaxIndexBytes <= 0 {
		opts.MaxIndexBytes = 16 << 20
	}
	if opts.KeepCharts <= 0 {
		opts.KeepCharts = 64
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.Proxy = nil // a repository named by a Release is reached directly, as members are
	base.TLSClientConfig = &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12}
	return &Fetcher{opts: opts, base: base, resolved: map[string]resolution{}, charts: map[string]*list.Element{}, order: list.New()}
}

// CloseIdleConnections closes the connections to repositories that are idle, as
// http.Client's does; a Fetcher that is done with is left with none.
func (f *Fetcher) CloseIdleConnections() { f.base.CloseIdleConnections() }

// Downloads is how many charts the Fetcher has downloaded (not found among those it keeps).
func (f *Fetcher) Downloads() int64 { return f.downloads.Load() }

// Fetch fetches src's chart: from those kept, when src resolves to a digest the Fetcher holds
// for the same credentials, and from the repository otherwise. Errors name the repository and
// why, and wrap this package's Err values.
func (f *Fetcher) Fetch(ctx context.Context, src Source) (*Chart, error) {
	origin, err := originOf(src.URL)
	if err != nil {
		return nil, err
	}
	if origin.Scheme == "http" && !f.opts.AllowPlainHTTP {
		return nil, fmt.Errorf("%w: %s: use https:// (or, for a lab, allow plain HTTP: clusterregistry controllers --chart-plain-http, or chartrepo.Options.AllowPlainHTTP)", ErrPlainHTTP, where(origin))
	}
	if !f.allowed(origin) {
		return nil, fmt.Errorf("%w: %s is not among the repositories' hosts the controller allows (%s)", ErrHostNotAllowed, origin.Host, strings.Join(f.opts.Hosts, ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	// Whose credentials is part of every key: a chart fetched with one Release's credentials is
	// not handed to a Release without them, even one that pins its digest.
	who := ""
	if c := src.Credentials; c != nil {
		sum := sha256.Sum256([]byte(c.Username + "\x00" + c.Password))
		who = hex.EncodeToString(sum[:8])
	}
	key := strings.Join([]string{src.URL, src.Chart, src.Version, who}, "\x00")
	v, err, _ := f.group.Do(key, func() (any, error) {
		c := &client{f: f, origin: origin, creds: src.Credentials, oci: strings.HasPrefix(src.URL, "oci://"), http: &http.Client{
			Transport: &pinned{base: f.base, origin: origin},
			// The transport refuses redirects; this keeps the client from following one if a
			// transport ever returned it.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}}
		r, err := f.resolve(ctx, c, src, key)
		if err != nil {
			return nil, err
		}
		if src.Digest != "" && r.digest != "" && r.digest != src.Digest {
			return nil, fmt.Errorf("%w: %s version %s is %s, not %s as spec pins", ErrDigest, where(origin), r.version, r.digest, src.Digest)
		}
		if r.digest != "" {
			if ch := f.kept(r.digest + who); ch != nil {
				return ch, nil
			}
		}
		archive, err := c.download(ctx, r.location, maxArchive)
		if err != nil {
			return nil, err
		}
		f.downloads.Add(1)
		sum := sha256.Sum256(archive)
		digest := "sha256:" + hex.EncodeToString(sum[:])
		if r.digest != "" && digest != r.digest {
			return nil, fmt.Errorf("%w: %s serves %s for version %s, whose digest it names %s", ErrDigest, where(origin), digest, r.version, r.digest)
		}
		if src.Digest != "" && digest != src.Digest {
			return nil, fmt.Errorf("%w: %s version %s is %s, not %s as spec pins", ErrDigest, where(origin), r.version, digest, src.Digest)
		}
		ch := &Chart{Archive: archive, Version: r.version, Digest: digest}
		f.keep(digest+who, ch)
		return ch, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Chart), nil
}

// resolve finds src's version and archive, from what was resolved in the last ResolveEvery or
// from the repository.
func (f *Fetcher) resolve(ctx context.Context, c *client, src Source, key string) (resolution, error) {
	f.mu.Lock()
	r, ok := f.resolved[key]
	f.mu.Unlock()
	if ok && time.Since(r.at) < f.opts.ResolveEvery {
		return r, nil
	}
	var err error
	if c.oci {
		r, err = c.resolveOCI(ctx, src)
	} else {
		r, err = c.resolveIndex(ctx, src)
	}
	if err != nil {
		return resolution{}, err
	}
	r.at = time.Now()
	f.mu.Lock()
	f.resolved[key] = r
	f.mu.Unlock()
	return r, nil
}

// allowed reports whether Options.Hosts allows origin's host.
func (f *Fetcher) allowed(origin *url.URL) bool {
	if len(f.opts.Hosts) == 0 {
		return true
	}
	for _, h := range f.opts.Hosts {
		if h == origin.Host || h == origin.Hostname() && origin.Port() == map[string]string{"https": "443", "http": "80"}[origin.Scheme] {
			return true
		}
	}
	return false
}

func (f *Fetcher) kept(key string) *Chart {
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.charts[key]; ok {
		f.order.MoveToFront(e)
		return e.Value.(*kept).chart
	}
	return nil
}

func (f *Fetcher) keep(key string, ch *Chart) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.charts[key]; ok {
		return
	}
	f.charts[key] = f.order.PushFront(&kept{key: key, chart: ch})
	for f.order.Len() > f.opts.KeepCharts {
		last := f.order.Back()
		f.order.Remove(last)
		delete(f.charts, last.Value.(*kept).key)
	}
}

// client is one fetch's: its requests go to origin only, with the Source's credentials.
type client struct {
	f      *Fetcher
	origin *url.URL
	creds  *Credentials
	http   *http.Client
	oci    bool   // an OCI registry
	bearer string // an OCI registry's token, once its token service gave one
}

// get GETs u (on the repository's origin), with the credentials, and reads at most limit bytes
// of the answer; a longer answer is ErrTooLarge, whatever its Content-Length says.
func (c *client) get(ctx context.Context, u string, accept string, limit int64) ([]byte, *http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", u, err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	switch {
	case c.bearer != "":
		req.Header.Set("Authorization", "Bearer "+c.bearer)
	case c.creds != nil:
		req.SetBasicAuth(c.creds.Username, c.creds.Password)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("fetching %s: %w", where(req.URL), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil, resp, &statusError{url: where(req.URL), code: resp.StatusCode}
	}
	if resp.ContentLength > limit {
		return nil, resp, fmt.Errorf("%w: %s is %d bytes, more than %d", ErrTooLarge, where(req.URL), resp.ContentLength, limit)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, resp, fmt.Errorf("reading %s: %w", where(req.URL), err)
	}
	if int64(len(body)) > limit {
		return nil, resp, fmt.Errorf("%w: %s is more than %d bytes", ErrTooLarge, where(req.URL), limit)
	}
	return body, resp, nil
}

// download fetches an archive at location (an HTTP URL on the origin); from an OCI registry, a
// blob, answering its challenge as for the manifest.
func (c *client) download(ctx context.Context, location string, limit int64) ([]byte, error) {
	if c.oci {
		return c.ociGet(ctx, location, "", limit)
	}
	body, _, err := c.get(ctx, location, "", limit)
	return body, err
}

// statusError is an answer other than 200.
type statusError struct {
	url  string
	code int
}

func (e *statusError) Error() string {
	switch e.code {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Sprintf("%s answered %d %s: the repository's credentials (spec.source.chart.repository.secretRef) are missing or not allowed", e.url, e.code, http.StatusText(e.code))
	case http.StatusNotFound:
		return fmt.Sprintf("%s answered 404 Not Found", e.url)
	}
	return fmt.Sprintf("%s answered %d %s", e.url, e.code, http.StatusText(e.code))
}

// unwrapURLError drops url.Error's quoting of the whole URL (a query may hold a token), keeping
// what it wraps.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// maxArchive bounds a packaged chart as downloaded: chartrender's own limit, checked before a
// byte more is read.
const maxArchive = chartrender.MaxArchiveBytes
