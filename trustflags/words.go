package trustflags

import (
	"errors"
	"strings"
)

// splitWords splits an --allow-exec-args value into words as a POSIX shell would, without
// expanding anything: white space separates words; single quotes keep everything up to the next
// one; double quotes keep everything but \" and \\, which stand for " and \; a backslash outside
// quotes keeps the next character. So an argument with a space is written "prod eu".
func splitWords(s string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, errors.New("a single quote is not closed")
			}
			word.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				word.WriteByte(s[i])
			}
			if !closed {
				return nil, errors.New("a double quote is not closed")
			}
			inWord = true
		case c == '\\':
			if i+1 == len(s) {
				return nil, errors.New("a backslash ends it")
			}
			i++
			word.WriteByte(s[i])
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}

// joinWords is the inverse of splitWords: words that need it are double-quoted.
func joinWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		if w != "" && !strings.ContainsAny(w, " \t\n'\"\\") {
			quoted[i] = w
			continue
		}
		quoted[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(w) + `"`
	}
	return strings.Join(quoted, " ")
}
