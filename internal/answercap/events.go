package answercap

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"mime"
	"strings"
)

// lines is a watch's body whose lines, its events, are at most limit bytes each.
type lines struct {
	io.ReadCloser
	limit int64
	run   int64 // bytes since the last newline
	err   error // once past the limit, every read fails
}

func (l *lines) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.ReadCloser.Read(p)
	for i := 0; i < n; {
		end := bytes.IndexByte(p[i:n], '\n')
		if end < 0 {
			end = n - i
		}
		if l.run+int64(end) > l.limit {
			l.err = eventTooLarge(l.limit)
			return i + int(l.limit-l.run), l.err
		}
		l.run += int64(end)
		if i += end; i < n { // at a newline: the next event begins after it
			l.run = 0
			i++
		}
	}
	return n, err
}

// frames is a watch's body framed as Kubernetes frames protobuf, each frame (an event) after
// its length in 4 bytes, big-endian; no frame may be longer than limit.
type frames struct {
	io.ReadCloser
	limit  int64
	header [4]byte
	got    int   // bytes of the current frame's header read
	left   int64 // bytes of the current frame still to come, once its header is read
	err    error // once past the limit, every read fails
}

func (f *frames) Read(p []byte) (int, error) {
	// Sticky: client-go reads a frame's length with io.ReadAtLeast, which keeps the 4 bytes it
	// asked for and drops the error that came with them.
	if f.err != nil {
		return 0, f.err
	}
	n, err := f.ReadCloser.Read(p)
	for i := 0; i < n; {
		if f.left > 0 {
			step := min(f.left, int64(n-i))
			f.left -= step
			i += int(step)
			continue
		}
		copied := copy(f.header[f.got:], p[i:n])
		f.got += copied
		i += copied
		if f.got < len(f.header) {
			continue
		}
		f.got = 0
		if f.left = int64(binary.BigEndian.Uint32(f.header[:])); f.left > f.limit {
			f.err = eventTooLarge(f.limit)
			return i, f.err
		}
	}
	return n, err
}

func eventTooLarge(limit int64) error {
	return fmt.Errorf("a watch event exceeds %d KiB: %w", limit>>10, ErrTooLarge)
}

// How a watch's events are told apart in its body, by its Content-Type.
const (
	unframed = iota
	byLine   // JSON: one event a line
	byLength // protobuf: each event after its length
)

func framing(contentType string) int {
	mediaType, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return unframed
	case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"):
		return byLine
	case mediaType == "application/vnd.kubernetes.protobuf":
		return byLength
	}
	return unframed
}
