package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"
)

// What the command prints is largely written by others: a Cluster's names, labels and provider
// config by whoever edits it, its status by a health controller quoting a member's answers, its
// Events, and the errors of members' API servers. Printed as they are, control characters in them
// would drive the reader's terminal: move the cursor and print over what came before, retitle the
// window, or set the clipboard (kubernetes/kubernetes#101695, which kubectl's printers escape).
// So everything the command writes, to standard output and standard error, goes through a
// terminalSafe writer, which shows such characters instead of sending them. What the command
// writes for programs (JSON, YAML, an ExecCredential) holds no control character raw, so only
// text for people changes.
type terminalSafe struct {
	w       io.Writer
	mu      sync.Mutex // health and rotate log from many goroutines
	pending []byte     // the start of a character that the next write completes
}

func (t *terminalSafe) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	data := p
	if len(t.pending) > 0 {
		data = append(t.pending, p...)
		t.pending = nil
	}
	// A character split across writes (a buffer flushed mid-character) waits for its end.
	if tail := incompleteTail(data); tail > 0 {
		t.pending = append([]byte(nil), data[len(data)-tail:]...)
		data = data[:len(data)-tail]
	}
	if _, err := io.WriteString(t.w, visible(string(data))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a character left incomplete by the last write, shown as the bytes it is.
func (t *terminalSafe) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.pending) == 0 {
		return nil
	}
	_, err := io.WriteString(t.w, visible(string(t.pending)))
	t.pending = nil
	return err
}

// incompleteTail is how many bytes at the end of p begin a UTF-8 character without ending it.
func incompleteTail(p []byte) int {
	for n := 1; n < utf8.UTFMax && n <= len(p); n++ {
		if b := p[len(p)-n]; utf8.RuneStart(b) {
			if b >= utf8.RuneSelf && !utf8.FullRune(p[len(p)-n:]) {
				return n
			}
			return 0
		}
	}
	return 0
}

// visible is s with what would drive a terminal shown instead: ESC as kubectl shows it ("^["),
// a carriage return as "\r", other C0 controls and DEL in caret notation ("^H"), C1 controls
// (which some terminals take as ESC sequences) as "\u009b", and bytes that are not UTF-8 as
// "\x9b". Newlines and tabs stay: the command's own layout is made of them.
func visible(s string) string {
	if !needsEscaping(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\x1b':
			b.WriteString("^[")
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20:
			b.WriteByte('^')
			b.WriteByte(byte(r) + 0x40)
		case r == 0x7f:
			b.WriteString("^?")
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscaping reports whether s holds anything visible changes: most output is printable
// ASCII, and is passed on without a copy.
func needsEscaping(s string) bool {
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
				return true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r < 0xa0 { // not UTF-8, or a C1 control
			return true
		}
		i += size
	}
	return false
}
