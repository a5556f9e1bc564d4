package answercap

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// ErrTooLarge is in the error of a read past the limit (errors.Is), whatever client-go wraps
// around it.
var ErrTooLarge = errors.New("answer too large")

// Wrap returns a transport wrapper, for rest.Config.Wrap or around an http.Client's transport,
// whose answers' bodies fail with an error that wraps ErrTooLarge past limit bytes.
func Wrap(limit int64) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper { return &capped{next: next, limit: limit} }
}

// WrapExceptWatches is Wrap for answers meant to end. A watch (?watch=true or 1), a stream of
// events meant to last as long as the client wants, is not bounded as a whole; each of its events
// is, to limit bytes: an event past it fails the read with ErrTooLarge, and client-go ends the
// watch with an error event.
//
// Why each event: client-go decodes a JSON watch with encoding/json, which reads an event whole
// before anything can look at its size, so one event without end would be held as it came; a
// protobuf event says its length first, and client-go holds up to 16 MiB of it. The API server
// writes a JSON watch one event a line, and a protobuf watch as frames each after its length:
// those are the events bounded. A watch in another encoding is let through.
func WrapExceptWatches(limit int64) func(http.RoundTripper) http.RoundTripper {
	return func(next http.RoundTripper) http.RoundTripper {
		return &capped{next: next, limit: limit, exceptWatches: true}
	}
}

type capped struct {
	next          http.RoundTripper
	limit         int64
	exceptWatches bool
}

func (c *capped) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	switch {
	case err != nil:
	case c.exceptWatches && isWatch(r):
		switch framing(resp.Header.Get("Content-Type")) {
		case byLine:
			resp.Body = &lines{ReadCloser: resp.Body, limit: c.limit}
		case byLength:
			resp.Body = &frames{ReadCloser: resp.Body, limit: c.limit}
		}
	default:
		resp.Body = &body{ReadCloser: resp.Body, left: c.limit, limit: c.limit}
	}
	return resp, err
}

// WrappedRoundTripper lets utilnet.CloseIdleConnectionsFor reach the transport under the cap:
// without it a client's connections are never closed, and each client built leaves one open.
func (c *capped) WrappedRoundTripper() http.RoundTripper { return c.next }

type body struct {
	io.ReadCloser
	left, limit int64
}

func (b *body) Read(p []byte) (int, error) {
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the cap tells a body of exactly limit from a longer one
	}
	n, err := b.ReadCloser.Read(p)
	if int64(n) > b.left {
		n, err = int(b.left), fmt.Errorf("the answer exceeds %d KiB: %w", b.limit>>10, ErrTooLarge)
	}
	b.left -= int64(n)
	return n, err
}

// isWatch reports whether r asks for a watch, as client-go asks (?watch=true) or by hand
// (?watch=1). Most requests have no "watch=" at all, and are told apart without parsing.
func isWatch(r *http.Request) bool {
	if !strings.Contains(r.URL.RawQuery, "watch=") {
		return false
	}
	v := r.URL.Query().Get("watch")
	return v == "true" || v == "1"
}
