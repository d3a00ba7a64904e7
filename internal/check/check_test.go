package check

import (
	"context"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

type named string

func (n named) Name() string {
	if n == "panic" {
		panic("no client")
	}
	return string(n)
}

func (named) Complete(context.Context, llm.Request) (*llm.Response, error) { return nil, nil }

type ptr struct{}

func (*ptr) Name() string                                                 { return "ptr" }
func (*ptr) Complete(context.Context, llm.Request) (*llm.Response, error) { return nil, nil }

// TestProvider: a usable provider passes; nil, a typed nil, a panicking
// Name and an empty name are each reported in the words Build prints.
func TestProvider(t *testing.T) {
	var typed *ptr
	for _, tc := range []struct {
		p    llm.Provider
		says string
	}{
		{named("openai"), ""},
		{&ptr{}, ""},
		{nil, "Provider is nil; set it to an llm.Provider"},
		{typed, "Provider is a nil *check.ptr; pass the provider its constructor returned"},
		{named("panic"), "Provider.Name panicked (no client); a provider must name itself"},
		{named(""), `Provider.Name returned ""; a provider must name itself`},
	} {
		err := Provider(tc.p)
		switch {
		case tc.says == "" && err != nil:
			t.Errorf("%#v: %v; want nil", tc.p, err)
		case tc.says != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.says)):
			t.Errorf("%#v: %v; want %q…", tc.p, err, tc.says)
		}
	}
}

// TestIsNil: nil and typed nils of every nilable kind are nil; values,
// including zero non-pointer values, are not.
func TestIsNil(t *testing.T) {
	var (
		p  *int
		m  map[int]int
		s  []int
		f  func()
		c  chan int
		pv llm.Provider = typedNil()
	)
	for _, v := range []any{nil, p, m, s, f, c, pv} {
		if !IsNil(v) {
			t.Errorf("IsNil(%#v) = false", v)
		}
	}
	for _, v := range []any{0, "", struct{}{}, named(""), &ptr{}, []int{}} {
		if IsNil(v) {
			t.Errorf("IsNil(%#v) = true", v)
		}
	}
}

func typedNil() llm.Provider { var p *ptr; return p }

// TestParams: only the zero Params sets nothing.
func TestParams(t *testing.T) {
	temp := 0.5
	for _, p := range []llm.Params{{MaxTokens: 1}, {Temperature: &temp}, {TopP: &temp}, {Stop: []string{}}, {Extra: map[string]any{"k": 1}}} {
		if !Params(&p) {
			t.Errorf("Params(%+v) = false; want true", p)
		}
	}
	if Params(&llm.Params{}) {
		t.Error("Params(zero) = true; want false")
	}
}
