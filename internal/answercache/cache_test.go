package answercache

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

// An answer is computed once per version of its inputs, and kept under its key alone.
func TestComputedOncePerVersion(t *testing.T) {
	c := New[int](8, 1<<20)
	computed := 0
	compute := func(body string) func() ([]byte, error) {
		return func() ([]byte, error) { computed++; return []byte(body), nil }
	}
	a, err := c.Answer("clusters", 1, "application/json", compute("one"))
	require.NoError(t, err)
	again, err := c.Answer("clusters", 1, "application/json", compute("not asked for"))
	require.NoError(t, err)
	require.Same(t, a, again)
	require.Equal(t, 1, computed, "an unchanged version was computed again")

	changed, err := c.Answer("clusters", 2, "application/json", compute("two"))
	require.NoError(t, err)
	require.Equal(t, "two", string(changed.Body()))
	require.NotEqual(t, a.ETag(), changed.ETag())
	other, err := c.Answer("releases", 2, "application/json", compute("two"))
	require.NoError(t, err)
	require.Equal(t, changed.ETag(), other.ETag(), "the tag is the bytes' hash: replicas agree")
	require.Equal(t, 3, computed)
	require.EqualValues(t, 3, c.Computed())
	require.EqualValues(t, len("two")*2, c.Bytes())
}

// The least recently used answers go first, by count and by bytes; a Cache of 0 keeps nothing;
// an error is not kept.
func TestBounded(t *testing.T) {
	c := New[int](2, 1<<20)
	body := func() ([]byte, error) { return []byte("12345"), nil }
	for _, k := range []string{"a", "b", "a", "c"} { // b is the least recently used when c comes
		_, err := c.Answer(k, 1, "text/plain", body)
		require.NoError(t, err)
	}
	require.Equal(t, 2, c.Len())
	require.EqualValues(t, 10, c.Bytes())
	require.Nil(t, c.lookup("b", 1))
	require.NotNil(t, c.lookup("a", 1))

	none := New[int](0, 0)
	_, err := none.Answer("a", 1, "text/plain", body)
	require.NoError(t, err)
	require.Zero(t, none.Len())

	failed := errors.New("the caches cannot say")
	_, err = c.Answer("d", 1, "text/plain", func() ([]byte, error) { return nil, failed })
	require.ErrorIs(t, err, failed)
	require.Nil(t, c.lookup("d", 1))

	small := New[int](10, 12) // two answers of 5 bytes, not three
	for _, k := range []string{"a", "b", "c"} {
		_, err := small.Answer(k, 1, "text/plain", body)
		require.NoError(t, err)
	}
	require.Equal(t, 2, small.Len())
	require.Nil(t, small.lookup("a", 1))
	_, err = small.Answer("big", 1, "text/plain", func() ([]byte, error) { return make([]byte, 13), nil })
	require.NoError(t, err)
	require.Nil(t, small.lookup("big", 1), "an answer over the bound was kept")
	require.Equal(t, 2, small.Len(), "an answer over the bound pushed others out")
}

func serve(t *testing.T, a *Answer, method string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, "/v0/clusters", nil)
	req.Header = header
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	return rec
}

// A request that names the answer's ETag is answered 304 with no body; one that names another,
// or none, is sent the answer.
func TestConditionalRequests(t *testing.T) {
	a := newAnswer([]byte(`[{"name":"member-1"}]`+"\n"), "application/json")
	full := serve(t, a, http.MethodGet, http.Header{})
	require.Equal(t, http.StatusOK, full.Code)
	require.Equal(t, a.ETag(), full.Header().Get("ETag"))
	require.Equal(t, "private, no-cache", full.Header().Get("Cache-Control"))
	require.Equal(t, "application/json", full.Header().Get("Content-Type"))
	require.Equal(t, string(a.Body()), full.Body.String())

	for _, inm := range []string{a.ETag(), `"other", ` + a.ETag(), "W/" + a.ETag(), "*"} {
		rec := serve(t, a, http.MethodGet, http.Header{"If-None-Match": {inm}})
		require.Equal(t, http.StatusNotModified, rec.Code, "If-None-Match: %s", inm)
		require.Empty(t, rec.Body.Bytes())
		require.Equal(t, a.ETag(), rec.Header().Get("ETag"))
	}
	for _, inm := range []string{`"other"`, `W/"other"`, a.ETag()[1:]} {
		rec := serve(t, a, http.MethodGet, http.Header{"If-None-Match": {inm}})
		require.Equal(t, http.StatusOK, rec.Code, "If-None-Match: %s", inm)
		require.Equal(t, string(a.Body()), rec.Body.String())
	}
	head := serve(t, a, http.MethodHead, http.Header{})
	require.Equal(t, http.StatusOK, head.Code)
	require.Empty(t, head.Body.Bytes())
}

// A client that accepts gzip is sent the answer compressed, compressed once; one that refuses it
// (q=0), or names no coding, is sent it as it is.
func TestGzip(t *testing.T) {
	body := bytes.Repeat([]byte(`{"name":"member-1","ready":"True"},`), 1000)
	a := newAnswer(body, "application/json")
	rec := serve(t, a, http.MethodGet, http.Header{"Accept-Encoding": {"deflate, gzip;q=0.8"}})
	require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
	require.Equal(t, "Accept-Encoding", rec.Header().Get("Vary"))
	require.Equal(t, "W/"+a.ETag(), rec.Header().Get("ETag"), "another encoding of the same content")
	zr, err := gzip.NewReader(rec.Body)
	require.NoError(t, err)
	got, err := io.ReadAll(zr)
	require.NoError(t, err)
	require.Equal(t, body, got)
	require.Less(t, a.gzipSize(), int64(len(body))/10)
	first := a.compressed()
	require.Same(t, &first[0], &a.compressed()[0], "compressed again")

	for _, ae := range []string{"", "gzip;q=0", "br", "identity"} {
		rec := serve(t, a, http.MethodGet, http.Header{"Accept-Encoding": {ae}})
		require.Empty(t, rec.Header().Get("Content-Encoding"), "Accept-Encoding: %q", ae)
		require.Equal(t, body, rec.Body.Bytes())
	}
	revalidated := serve(t, a, http.MethodGet, http.Header{"Accept-Encoding": {"gzip"}, "If-None-Match": {"W/" + a.ETag()}})
	require.Equal(t, http.StatusNotModified, revalidated.Code)
}
