package main

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

// alignedRows writes the tables get -w prints, one change at a time, under the columns of the
// first one. cli-runtime's table printer sizes each table's columns to its own cells, so a row
// printed alone lines up with nothing (kubectl get -w shows the same): this writer learns where
// each column starts from the first line it is given (the header, or the first row with
// --no-headers) and pads the cells of each later line to those columns, widening none of them;
// a cell wider than its column pushes the rest of its line, as a terminal would. A line it cannot
// split into the same number of cells passes as it is.
type alignedRows struct {
	out io.Writer
	// widths are the columns' widths but the last's, from the first line; nil until then.
	widths []int
	// partial is a line not yet ended.
	partial []byte
}

// cellGap is what the table printer puts between cells: three spaces at least (its tabwriter's
// padding), which no header holds and cells rarely do.
var cellGap = regexp.MustCompile(` {3,}`)

func (a *alignedRows) Write(p []byte) (int, error) {
	a.partial = append(a.partial, p...)
	for {
		i := bytes.IndexByte(a.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(a.partial[:i])
		a.partial = a.partial[i+1:]
		if _, err := io.WriteString(a.out, a.align(line)+"\n"); err != nil {
			return len(p), err
		}
	}
}

// align is line padded to the learned columns, or line as it is.
func (a *alignedRows) align(line string) string {
	if a.widths == nil {
		start := 0 // where the current column starts, in characters, as the tabwriter counts
		for _, gap := range cellGap.FindAllStringIndex(line, -1) {
			next := utf8.RuneCountInString(line[:gap[1]])
			a.widths = append(a.widths, next-start)
			start = next
		}
		if a.widths == nil {
			a.widths = []int{} // one column: nothing to pad
		}
		return line
	}
	cells := cellGap.Split(line, -1)
	if len(cells) != len(a.widths)+1 {
		return line
	}
	var b strings.Builder
	for i, cell := range cells {
		b.WriteString(cell)
		if i == len(cells)-1 {
			break
		}
		pad := a.widths[i] - utf8.RuneCountInString(cell)
		b.WriteString(strings.Repeat(" ", max(pad, 3)))
	}
	return b.String()
}
