package storm

import (
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// table is one scenario's printed result: a title, one line saying what it
// shows, aligned columns (the first left-aligned, the others right-aligned)
// and notes below.
type table struct {
	title, shows string
	head         []string
	rows         [][]string
	notes        []string
}

// row adds a row; each cell is formatted with %v, floats with two
// decimals, durations rounded to the millisecond.
func (tb *table) row(cells ...any) {
	r := make([]string, len(cells))
	for i, c := range cells {
		switch v := c.(type) {
		case float64:
			r[i] = fmt.Sprintf("%.2f", v)
		case time.Duration:
			r[i] = v.Round(time.Millisecond).String()
		default:
			r[i] = fmt.Sprint(v)
		}
	}
	tb.rows = append(tb.rows, r)
}

func (tb *table) note(format string, args ...any) {
	tb.notes = append(tb.notes, fmt.Sprintf(format, args...))
}

func (tb *table) String() string {
	width := make([]int, len(tb.head))
	for _, r := range append([][]string{tb.head}, tb.rows...) {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	var b strings.Builder
	line := func(r []string) {
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			switch {
			case i == 0:
				b.WriteString(c + pad)
			default:
				b.WriteString("  " + pad + c)
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\n%s\n%s\n\n", tb.title, tb.shows)
	line(tb.head)
	rule := make([]string, len(width))
	for i, w := range width {
		rule[i] = strings.Repeat("-", w)
	}
	line(rule)
	for _, r := range tb.rows {
		line(r)
	}
	if len(tb.notes) > 0 {
		b.WriteString("\n")
	}
	for _, n := range tb.notes {
		b.WriteString(n + "\n")
	}
	return b.String()
}

// raceNote adds a note, after "Race detector on: ", when the race
// detector is: what the scenario ran instead of its usual length.
func (tb *table) raceNote(format string, args ...any) {
	if raceEnabled {
		tb.note("Race detector on: "+format, args...)
	}
}

// print writes the table to the test's output (shown with go test -v).
func (tb *table) print(t *testing.T) {
	fmt.Fprint(t.Output(), tb.String())
}
