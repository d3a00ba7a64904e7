package problems

import (
	"errors"
	"testing"
	"time"
)

func TestList(t *testing.T) {
	sentinel := errors.New("pkg: invalid")
	l := New(sentinel)
	if l.Err() != nil {
		t.Fatal("an empty list reports an error")
	}
	l.Addf("A is %d; use %s", -1, "0")
	l.Addf("B is wrong")
	err := l.Err()
	if !errors.Is(err, sentinel) || err.Error() != "pkg: invalid: A is -1; use 0\npkg: invalid: B is wrong" {
		t.Fatalf("got %q", err)
	}
}

func TestIn(t *testing.T) {
	l := In(Head("pkg: invalid configuration"), "memory store")
	l.Addf("A is %d", -1)
	NotNegative(l, "TTL", -time.Second, time.Hour)
	NotNegative(l, "MaxEntries", -2, "the default")
	NotNegative(l, "Zero", 0, 1)
	err := l.Err()
	want := "pkg: invalid configuration: memory store: A is -1\n" +
		"pkg: invalid configuration: memory store: TTL is -1s; it must not be negative (0 means 1h0m0s)\n" +
		"pkg: invalid configuration: memory store: MaxEntries is -2; it must not be negative (0 means the default)"
	if !errors.Is(err, ErrInvalidConfig) || err.Error() != want {
		t.Fatalf("got %q", err)
	}
}
