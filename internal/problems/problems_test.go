package problems

import (
	"errors"
	"testing"
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
