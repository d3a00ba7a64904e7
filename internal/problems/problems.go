// Package problems collects the problems a configuration check finds, so
// that a constructor can report all of them at once, and owns the one
// invalid-configuration sentinel of the module, llm.ErrInvalidConfig, under
// the name ErrInvalidConfig: every package's configuration errors match it.
package problems

import (
	"errors"
	"fmt"

	"github.com/backstop-llm/backstop/llm"
)

// ErrInvalidConfig is llm.ErrInvalidConfig, matched by every configuration
// error of the module. Each package reports its problems under a head of
// its own (see Head), which matches it.
var ErrInvalidConfig = llm.ErrInvalidConfig

// Head returns an error reading text that matches ErrInvalidConfig: the
// head a package puts before each of its configuration problems, such as
// "breaker: invalid configuration", so that a message says which package
// found the problem while errors.Is(err, ErrInvalidConfig) holds.
func Head(text string) error { return head(text) }

type head string

func (h head) Error() string { return string(h) }

// Is reports whether target is ErrInvalidConfig.
func (h head) Is(target error) bool { return target == ErrInvalidConfig }

// List is the problems found so far. The zero List is not usable; use New.
type List struct {
	prefix error
	part   string // "" or the part of the configuration, with ": "
	errs   []error
}

// New starts a list whose problems each wrap prefix, printed before them:
// a package's Head, or any sentinel.
func New(prefix error) *List { return &List{prefix: prefix} }

// In starts a list like New whose problems each name, after prefix, the
// part of the configuration they are in, such as "ratio budget":
// "budget: invalid configuration: ratio budget: Window is -1s; ...".
func In(prefix error, part string) *List { return &List{prefix: prefix, part: part + ": "} }

// Addf records a problem: what is wrong and what to change.
func (l *List) Addf(format string, args ...any) {
	l.errs = append(l.errs, fmt.Errorf("%w: %s"+format, append([]any{l.prefix, l.part}, args...)...))
}

// NotNegative records, when v is negative, that field must not be, and
// what 0 means instead: "Window is -1s; it must not be negative (0 means
// 10s)". zero is the default, or words such as "the default".
func NotNegative[T ~int | ~int64](l *List, field string, v T, zero any) {
	if v < 0 {
		l.Addf("%s is %v; it must not be negative (0 means %v)", field, v, zero)
	}
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
