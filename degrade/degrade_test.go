package degrade_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

func TestStaticAnswersACopy(t *testing.T) {
	s := degrade.Static(llm.Response{Text: "busy"})
	a, err := s.Degrade(context.Background(), llm.Request{})
	if err != nil || a.Text != "busy" || s.Name() != "static" {
		t.Fatalf("%+v %v %q", a, err, s.Name())
	}
	a.Text = "changed"
	if b, _ := s.Degrade(context.Background(), llm.Request{}); b.Text != "busy" {
		t.Fatalf("a caller changed the static answer: %q", b.Text)
	}
}

// Bound to a chain with a Schema, Static checks its answer (renamed or
// not); without one, anything goes.
func TestStaticBindChecksTheSchema(t *testing.T) {
	schema, err := validate.Compile([]byte(`{"type":"object","required":["answer"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []degrade.Degradation{degrade.Static(llm.Response{Text: "We are busy."}), degrade.Named("sorry", degrade.Static(llm.Response{Text: "We are busy."}))} {
		b := d.(degrade.Binder)
		if _, err := b.Bind("c", schema); !errors.Is(err, validate.ErrInvalid) || !strings.HasPrefix(err.Error(), "the Static answer does not pass the chain's Schema") {
			t.Errorf("%s: Bind = %v; want the schema's complaint", d.Name(), err)
		}
		if bound, err := b.Bind("c", nil); err != nil || bound.Name() != d.Name() {
			t.Errorf("%s without a schema: %v, %v", d.Name(), bound, err)
		}
	}
	if _, err := degrade.Static(llm.Response{Text: `{"answer":"later"}`}).(degrade.Binder).Bind("c", schema); err != nil {
		t.Errorf("a passing answer: %v", err)
	}
}

func TestFuncAnswersWithTheFunction(t *testing.T) {
	f := degrade.Func(func(_ context.Context, req llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "echo " + req.Messages[0].Content}, nil
	})
	resp, err := f.Degrade(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil || resp.Text != "echo hi" || f.Name() != "func" {
		t.Fatalf("%+v %v %q", resp, err, f.Name())
	}
}

// Named renames a degradation and keeps what it is: a LastGood renamed is
// still bound, and bound it still remembers, under the new name.
func TestNamedKeepsWhatItWraps(t *testing.T) {
	lg := degrade.Named("memo", degrade.LastGood(degrade.LastGoodConfig{Store: memory(t)}))
	if lg.Name() != "memo" {
		t.Fatalf("name %q", lg.Name())
	}
	d, err := lg.(degrade.Binder).Bind("c", nil)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := d.(degrade.Rememberer)
	if !ok || r.Name() != "memo" {
		t.Fatalf("bound: %T named %q; want a Rememberer named memo", d, d.Name())
	}
	ctx := context.Background()
	if err := r.Remember(ctx, askAs("", "hi"), "p", &llm.Response{Text: "then"}); err != nil {
		t.Fatal(err)
	}
	if resp, _, err := r.Recall(ctx, askAs("", "hi")); err != nil || resp.Text != "then" {
		t.Fatalf("recall: %+v %v", resp, err)
	}
	if _, err := degrade.Named("bad", degrade.LastGood(degrade.LastGoodConfig{})).(degrade.Binder).Bind("c", nil); err == nil {
		t.Fatal("a renamed LastGood without a Store bound")
	}
	f := degrade.Named("other", degrade.Func(func(context.Context, llm.Request) (*llm.Response, error) { return nil, nil }))
	if bf, err := f.(degrade.Binder).Bind("c", nil); err != nil || bf.Name() != "other" {
		t.Fatalf("a renamed Func bound: %v %v", bf, err)
	}
	if _, ok := f.(degrade.Rememberer); ok {
		t.Fatal("a renamed Func claims to remember")
	}
}
