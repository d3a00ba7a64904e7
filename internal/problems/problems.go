// Package problems collects the problems a configuration check finds, so
// that a constructor can report all of them at once, each matching the
// package's sentinel error with errors.Is.
package problems

import (
	"errors"
	"fmt"
)

// List is the problems found so far. The zero List is not usable; use New.
type List struct {
	prefix error
	errs   []error
}

// New starts a list whose problems each wrap sentinel.
func New(sentinel error) *List { return &List{prefix: sentinel} }

// Addf records a problem: what is wrong and what to change.
func (l *List) Addf(format string, args ...any) {
	l.errs = append(l.errs, fmt.Errorf("%w: "+format, append([]any{l.prefix}, args...)...))
}

// Add records problems found by another check (an error that already
// matches its own sentinel), if err is not nil.
func (l *List) Add(err error) {
	if err != nil {
		l.errs = append(l.errs, err)
	}
}

// Err returns every problem joined, or nil when there is none.
func (l *List) Err() error { return errors.Join(l.errs...) }
