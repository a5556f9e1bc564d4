package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is s as text that a terminal shows as it is. Control characters (C0, DEL, C1) would
// drive the terminal of whoever prints s: they become U+FFFD, as bytes that are not UTF-8 do.
// Spaces and newlines stay.
func Printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '\n' || unicode.IsPrint(r) {
			return r
		}
		return utf8.RuneError
	}, strings.ToValidUTF8(s, "\uFFFD"))
}

// Shorten is s in at most limit bytes, cut between characters and marked "..." where cut.
func Shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// OneLine is s printable, its runs of white space made one space, in at most limit bytes.
func OneLine(s string, limit int) string {
	return Shorten(Printable(strings.Join(strings.Fields(s), " ")), limit)
}
