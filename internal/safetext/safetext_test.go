package safetext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain, Zürich, 東京 🚀":             "plain, Zürich, 東京 🚀",
		"two\nlines":                      "two\nlines",
		"\x1b[2J\a\u009b\r\t\x00\x7f\xff": "\uFFFD[2J\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD\uFFFD",
	} {
		require.Equal(t, want, Printable(in), "%q", in)
	}
}

func TestShortenCutsBetweenCharacters(t *testing.T) {
	require.Equal(t, "short", Shorten("short", 5))
	for limit := 4; limit < 20; limit++ {
		got := Shorten(strings.Repeat("é", 10), limit)
		require.LessOrEqual(t, len(got), limit)
		require.True(t, utf8.ValidString(got), "%d: %q", limit, got)
		require.True(t, strings.HasSuffix(got, "..."), "%d: %q", limit, got)
	}
}

func TestOneLine(t *testing.T) {
	require.Equal(t, "a b \uFFFDc ...", OneLine("a\n  b\t\x1bc "+strings.Repeat("d", 100), 12))
}
