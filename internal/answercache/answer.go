package answercache

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Answer is one encoded answer, served as it is as often as asked for. It is immutable once
// made.
type Answer struct {
	body        []byte
	contentType string
	etag        string

	gzMu sync.Mutex
	gz   atomic.Pointer[[]byte] // the body compressed, once asked for
}

func newAnswer(body []byte, contentType string) *Answer {
	return &Answer{body: body, contentType: contentType, etag: etagOf(body)}
}

// ETag is the answer's strong entity tag, quoted, as the ETag header carries it.
func (a *Answer) ETag() string { return a.etag }

// Body is the answer's bytes; callers must not change them.
func (a *Answer) Body() []byte { return a.body }

func (a *Answer) size() int64 { return int64(len(a.body)) }

func (a *Answer) gzipSize() int64 {
	if gz := a.gz.Load(); gz != nil {
		return int64(len(*gz))
	}
	return 0
}

// ServeHTTP writes the answer with status 200, or 304 and no body when the request's
// If-None-Match names its ETag; compressed when the request accepts gzip. Either way it says
// that the answer varies by Accept-Encoding, and that only the requester may keep it, and must ask
// again before using it (private, no-cache): what a requester may see is theirs.
func (a *Answer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "private, no-cache")
	h.Add("Vary", "Accept-Encoding")
	gz := acceptsGzip(r.Header.Values("Accept-Encoding"))
	etag := a.etag
	if gz {
		etag = "W/" + a.etag // another encoding of the same content: weakly the same
	}
	h.Set("ETag", etag)
	if noneMatch := r.Header.Values("If-None-Match"); len(noneMatch) > 0 && matches(noneMatch, a.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.body
	if gz {
		body = a.compressed()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Type", a.contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// compressed is the body gzipped, made by the first request that accepts gzip.
func (a *Answer) compressed() []byte {
	if gz := a.gz.Load(); gz != nil {
		return *gz
	}
	a.gzMu.Lock()
	defer a.gzMu.Unlock()
	if gz := a.gz.Load(); gz != nil {
		return *gz
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(a.body) // a bytes.Buffer does not fail
	_ = zw.Close()
	gz := buf.Bytes()
	a.gz.Store(&gz)
	return gz
}

// matches reports whether If-None-Match's values name etag, by the weak comparison RFC 9110
// asks of If-None-Match (W/ ignored), or are "*".
func matches(values []string, etag string) bool {
	for _, v := range values {
		for _, tag := range strings.Split(v, ",") {
			tag = strings.TrimSpace(tag)
			if tag == "*" || strings.TrimPrefix(tag, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// acceptsGzip reports whether Accept-Encoding's values accept gzip: named, or by "*", with a
// q-value above 0.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, coding := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(coding), ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			if q, ok := qValue(params); !ok || q > 0 {
				return true
			}
		}
	}
	return false
}

// qValue is the q parameter of params, if there is one that parses.
func qValue(params string) (float64, bool) {
	for _, p := range strings.Split(params, ";") {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return q, err == nil
		}
	}
	return 0, false
}
