package answercap

import (
	"encoding/binary"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"
)

type answer string

func (a answer) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(string(a)))}, nil
}

// typed is an answer with a Content-Type, read in pieces as a network gives them: half of what
// is asked for, or (oneByte) a byte at a time, so that a length is read in parts.
type typed struct {
	contentType, body string
	oneByte           bool
}

func (a typed) RoundTrip(*http.Request) (*http.Response, error) {
	r := iotest.HalfReader(strings.NewReader(a.body))
	if a.oneByte {
		r = iotest.OneByteReader(strings.NewReader(a.body))
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {a.contentType}}, Body: io.NopCloser(r)}, nil
}

func TestWrap(t *testing.T) {
	const limit = 4 << 10
	for _, tc := range []struct {
		size    int
		tooLong bool
	}{{limit, false}, {limit + 1, true}, {10, false}, {0, false}, {10 * limit, true}} {
		client := &http.Client{Transport: Wrap(limit)(answer(strings.Repeat("x", tc.size)))}
		resp, err := client.Get("https://member.example")
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		if !tc.tooLong {
			require.NoError(t, err, "size %d", tc.size)
			require.Len(t, data, tc.size)
			continue
		}
		require.ErrorIs(t, err, ErrTooLarge, "size %d", tc.size)
		require.EqualError(t, err, "the answer exceeds 4 KiB: answer too large")
		require.Len(t, data, limit)
	}
}

func TestWrapExceptWatches(t *testing.T) {
	const limit = 4 << 10
	long := answer(strings.Repeat("x", 2*limit))
	for url, whole := range map[string]bool{
		"https://member.example/api/v1/pods?watch=true":                 true,
		"https://member.example/api/v1/pods?resourceVersion=1&watch=1":  true,
		"https://member.example/api/v1/pods?watch=false":                false,
		"https://member.example/api/v1/pods":                            false,
		"https://member.example/api/v1/pods?labelSelector=watch%3Dtrue": false,
	} {
		client := &http.Client{Transport: WrapExceptWatches(limit)(typed{contentType: "application/json", body: string(long)})}
		resp, err := client.Get(url)
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		if whole {
			require.ErrorIs(t, err, ErrTooLarge, "%s: an event without end", url)
			require.EqualError(t, err, "a watch event exceeds 4 KiB: answer too large")
			require.Len(t, data, limit, url)
		} else {
			require.ErrorIs(t, err, ErrTooLarge, url)
		}
	}
}

// A watch is read whole however long, but none of its events is longer than the limit: in JSON
// one event a line, in protobuf each after its length.
func TestWrapExceptWatchesBoundsEachEvent(t *testing.T) {
	const limit = 4 << 10
	line := func(n int) string { return strings.Repeat("e", n) + "\n" }
	frame := func(n int) string {
		var length [4]byte
		binary.BigEndian.PutUint32(length[:], uint32(n))
		return string(length[:]) + strings.Repeat("\n", n) // newlines: no line to protobuf
	}
	const protobuf = "application/vnd.kubernetes.protobuf;stream=watch"
	for _, tc := range []struct {
		name, contentType, body string
		read                    int // how much is read before ErrTooLarge; -1: all, without error
	}{
		{"JSON: many events, each at the limit", "application/json", strings.Repeat(line(limit), 10), -1},
		{"JSON: an event past the limit, after others", "application/json", line(10) + line(limit) + line(limit+1) + line(1), 11 + limit + 1 + limit},
		{"JSON: no newline, past the limit", "application/json; charset=utf-8", strings.Repeat("e", limit+1), limit},
		{"JSON: empty events", "application/json", strings.Repeat("\n", 3*limit), -1},
		{"JSON: a media type of its kind", "application/merge-patch+json", line(limit + 1), limit},
		{"protobuf: many events, each at the limit", protobuf, strings.Repeat(frame(limit)+frame(0), 10), -1},
		{"protobuf: an event past the limit, after others", protobuf, frame(10) + frame(limit) + frame(limit+1) + frame(1), 14 + 4 + limit + 4},
		{"protobuf: a length past 2 GiB", protobuf, "\xff\xff\xff\xff", 4},
		{"another encoding, let through", "application/cbor-seq", strings.Repeat("c", 3*limit), -1},
		{"no Content-Type, let through", "", strings.Repeat("c", 3*limit), -1},
	} {
		for _, oneByte := range []bool{false, true} {
			client := &http.Client{Transport: WrapExceptWatches(limit)(typed{tc.contentType, tc.body, oneByte})}
			resp, err := client.Get("https://member.example/api/v1/pods?watch=true")
			require.NoError(t, err)
			data, err := io.ReadAll(resp.Body)
			if tc.read < 0 {
				require.NoError(t, err, tc.name)
				require.Equal(t, tc.body, string(data), tc.name)
				continue
			}
			require.ErrorIs(t, err, ErrTooLarge, tc.name)
			require.EqualError(t, err, "a watch event exceeds 4 KiB: answer too large", tc.name)
			require.Equal(t, tc.body[:tc.read], string(data), "%s, a byte at a time: %v", tc.name, oneByte)
			// And every read after: client-go reads a protobuf event's length with io.ReadAtLeast,
			// which drops an error that comes with the bytes it asked for.
			n, err := resp.Body.Read(make([]byte, 8))
			require.Zero(t, n, tc.name)
			require.ErrorIs(t, err, ErrTooLarge, tc.name)
		}
	}
}

// FuzzWrapExceptWatches: whatever a member writes as a watch, in pieces of any size, what the
// client reads is a prefix of it; read whole, none of its events is past the limit.
func FuzzWrapExceptWatches(f *testing.F) {
	f.Add(true, []byte("{}\n{\"a\":1}\n"), uint8(3))
	f.Add(false, []byte("\x00\x00\x00\x02ab\x00\x00\x00\x00\x00\x00\x01\x00"), uint8(1))
	f.Fuzz(func(t *testing.T, json bool, body []byte, piece uint8) {
		const limit = 64
		contentType := "application/vnd.kubernetes.protobuf;stream=watch"
		if json {
			contentType = "application/json"
		}
		next := roundTripperFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {contentType}},
				Body: io.NopCloser(&pieces{data: body, size: int(piece%16) + 1})}, nil
		})
		resp, err := (&http.Client{Transport: WrapExceptWatches(limit)(next)}).Get("https://member.example/?watch=true")
		require.NoError(t, err)
		data, err := io.ReadAll(resp.Body)
		require.True(t, strings.HasPrefix(string(body), string(data)), "read what was not written")
		if err != nil {
			require.ErrorIs(t, err, ErrTooLarge)
			return
		}
		require.Equal(t, string(body), string(data))
		for rest := data; len(rest) > 0; {
			if json {
				event, after, _ := strings.Cut(string(rest), "\n")
				require.LessOrEqual(t, len(event), limit)
				rest = []byte(after)
				continue
			}
			if len(rest) < 4 {
				break // a length cut short: client-go's reader says so
			}
			length := binary.BigEndian.Uint32(rest)
			require.LessOrEqual(t, length, uint32(limit))
			rest = rest[min(len(rest), 4+int(length)):]
		}
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// pieces reads data at most size bytes at a time.
type pieces struct {
	data []byte
	size int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), p.size)], p.data)
	p.data = p.data[n:]
	return n, nil
}
