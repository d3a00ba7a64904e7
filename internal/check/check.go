// Package check holds the checks Build runs on values a caller hands in
// as interfaces: a nil that is not == nil (a typed nil), and a provider
// that cannot name itself. Each would fail, or panic, at call time.
package check

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/backstop-llm/backstop/llm"
)

// IsNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, func or channel: a typed nil, whose methods would panic when
// a call used it.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// Provider returns nil when p can serve a target: it is not nil, not a
// typed nil, and its Name returns a name without panicking. Otherwise it
// says what is wrong and what to change, in words Build reports as they
// are.
func Provider(p llm.Provider) error {
	if IsNil(p) {
		if p != nil {
			return fmt.Errorf("Provider is a nil %T; pass the provider its constructor returned (did it fail?)", p)
		}
		return errors.New("Provider is nil; set it to an llm.Provider such as anthropic.New's")
	}
	name, err := nameOf(p)
	switch {
	case err != nil:
		return fmt.Errorf("Provider.Name panicked (%v); a provider must name itself", err)
	case name == "":
		return errors.New("Provider.Name returned \"\"; a provider must name itself (it is the gen_ai.provider.name of its spans, and tiers compare it)")
	}
	return nil
}

// nameOf returns p.Name(), or the panic it raised as an error.
func nameOf(p llm.Provider) (name string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return p.Name(), nil
}

// Params reports whether p sets anything: false for the zero Params,
// which a target sends as no parameters at all.
func Params(p *llm.Params) bool {
	return p.MaxTokens != 0 || p.Temperature != nil || p.TopP != nil || p.Stop != nil || len(p.Extra) != 0
}
