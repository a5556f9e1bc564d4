package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: apidiff -m -incompatible OLD NEW | apicompat CHANGELOG.md")
		os.Exit(2)
	}
	changelog, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicompat:", err)
		os.Exit(2)
	}
	changes, err := incompatible(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "apicompat:", err)
		os.Exit(2)
	}
	missing := unannounced(changes, breakingSection(string(changelog)))
	for _, c := range changes {
		fmt.Printf("incompatible: %s\n", c.line)
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "apicompat: %d incompatible API changes are not named under \"### Breaking\" in %s's Unreleased section:\n", len(missing), os.Args[1])
		for _, c := range missing {
			fmt.Fprintf(os.Stderr, "  %s   (%s)\n", c.name, c.line)
		}
		fmt.Fprintln(os.Stderr, "Name each there, with what users should do instead, or keep the API compatible.")
		os.Exit(1)
	}
}

// change is one incompatible change: apidiff's line and the name the changelog must use.
type change struct{ name, line string }

// incompatible reads apidiff's "- ./pkg.Name: what" lines.
func incompatible(r io.Reader) ([]change, error) {
	var out []change
	s := bufio.NewScanner(r)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		rest, ok := strings.CutPrefix(line, "- ")
		if !ok {
			continue
		}
		name, _, ok := strings.Cut(rest, ": ")
		if !ok {
			return nil, fmt.Errorf("an apidiff line without a colon: %q", line)
		}
		name = strings.TrimPrefix(name, "./")
		name = strings.NewReplacer("(*", "", "(", "", ")", "").Replace(name)
		out = append(out, change{name: name, line: line})
	}
	return out, s.Err()
}

// breakingSection is the text under "### Breaking" within "## Unreleased".
func breakingSection(changelog string) string {
	_, unreleased, ok := strings.Cut(changelog, "\n## Unreleased")
	if !ok {
		return ""
	}
	unreleased, _, _ = strings.Cut(unreleased, "\n## ")
	_, breaking, ok := strings.Cut(unreleased, "\n### Breaking")
	if !ok {
		return ""
	}
	breaking, _, _ = strings.Cut(breaking, "\n### ")
	return breaking
}

// unannounced are the changes whose names the section does not mention, as a whole word: "Fleet"
// does not announce "Fleet.Start".
func unannounced(changes []change, section string) []change {
	var out []change
	for _, c := range changes {
		if !mentions(section, c.name) {
			out = append(out, c)
		}
	}
	return out
}

func mentions(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		end := i + j + len(name)
		if end == len(text) || !isNameByte(text[end]) {
			if start := i + j; start == 0 || !isNameByte(text[start-1]) {
				return true
			}
		}
		i += j + 1
	}
}

func isNameByte(b byte) bool {
	return b == '.' || b == '_' || b >= '0' && b <= '9' || b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z'
}
