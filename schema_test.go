package backstop_test

// End-to-end tests of schema validation, typed decoding and last-known-good
// answers, on the fake provider in virtual time.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/validate"
)

var answerSchema = []byte(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["answer", "confidence"],
  "properties": {
    "answer": {"type": "string", "minLength": 1},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1}
  },
  "additionalProperties": false
}`)

type answer struct {
	Answer     string  `json:"answer"`
	Confidence float64 `json:"confidence"`
}

const (
	good    = `{"answer": "It ships today.", "confidence": 0.9}`
	bad     = `{"answer": "It ships today.", "confidence": "high"}`
	fenced  = "Here you go:\n```json\n" + good + "\n```"
	refusal = "I'm not sure, sorry."
)

// schemaChain is a primary and a provider fallback on two fake servers,
// with the answer schema and a LastGood degradation configured by lastGood.
func schemaChain(t *testing.T, lastGood degrade.LastGoodConfig) (*fake.Server, *fake.Server, *chain.Chain) {
	t.Helper()
	a, o := fake.New(), fake.New()
	c, err := chain.New("support").Schema(answerSchema).
		Primary(chain.Target{Name: "sonnet", Provider: claude(t, a), Model: sonnet}).
		OrProvider(chain.Target{Name: "gpt", Provider: openAI(t, o), Model: gpt}).
		OrDegrade(degrade.LastGood(lastGood)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return a, o, c
}

func memory(t *testing.T) *cache.Memory {
	t.Helper()
	m, err := cache.NewMemory(cache.MemoryConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestInvalidAnswerIsReaskedOnceThenPassedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, o, c := schemaChain(t, degrade.LastGoodConfig{Store: memory(t)})
		a.Script(sonnet, fake.Answer(bad), fake.Answer(refusal))
		o.Script(gpt, fake.Answer(fenced))
		res, err := c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		if a.Requests(sonnet) != 2 || res.Served.Target != "gpt" {
			t.Fatalf("%d requests to the primary, served by %q", a.Requests(sonnet), res.Served.Target)
		}
		if string(res.JSON) != good {
			t.Fatalf("JSON = %s", res.JSON)
		}
		// The first attempt's violation names the path and the keyword.
		var verr *validate.ValidationError
		first := res.Attempts[0]
		if first.Kind != llm.KindInvalidOutput || first.Decision != chain.DecisionRetry || !errors.As(first.Err, &verr) {
			t.Fatalf("first attempt %+v", first)
		}
		if v := verr.Violations[0]; v.Path != "/confidence" || v.Keyword != "type" {
			t.Fatalf("violation %+v, want /confidence type", v)
		}
		if second := res.Attempts[1]; second.Kind != llm.KindInvalidOutput || !errors.Is(second.Err, validate.ErrNoJSON) ||
			second.Decision != chain.DecisionNext || second.Wait != 0 {
			t.Fatalf("second attempt %+v", second)
		}
		// The re-ask carried the answer and the problem to the model.
		var body struct {
			Messages []struct{ Role, Content string }
		}
		if err := json.Unmarshal(a.Calls(sonnet)[1].Body, &body); err != nil {
			t.Fatal(err)
		}
		msgs := body.Messages
		if len(msgs) != 3 || msgs[1].Role != "assistant" || msgs[1].Content != bad ||
			msgs[2].Role != "user" || !strings.Contains(msgs[2].Content, "/confidence") {
			t.Fatalf("re-ask conversation %+v", msgs)
		}
	})
}

func TestLastGoodServesARememberedAnswerWhenEverythingIsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory(t)
		a, o, c := schemaChain(t, degrade.LastGoodConfig{Store: store, MaxAge: time.Hour})
		a.Script(sonnet, fake.Answer(good).RequestID("req_then"))
		if _, err := c.Call(t.Context(), ask); err != nil {
			t.Fatal(err)
		}
		answered := time.Now()

		time.Sleep(20 * time.Minute)
		a.Script(sonnet, fake.Overloaded())
		o.Script(gpt, fake.Status(503))
		res, err := c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		// The age is the answer's at the moment it was served: 20 minutes
		// plus the seconds the chain spent on the failing targets.
		if !res.Degraded || res.Served.Target != "last-good" || res.Age != time.Since(answered) ||
			res.Age < 20*time.Minute || string(res.JSON) != good ||
			res.Served.RequestID != "req_then" {
			t.Fatalf("served %+v, degraded %v, age %v, JSON %s", res.Served, res.Degraded, res.Age, res.JSON)
		}

		// A question never answered gets no invented answer.
		other := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Can I pay by card?"}}}
		res, err = c.Call(t.Context(), other)
		if !errors.Is(err, chain.ErrExhausted) || !errors.Is(err, degrade.ErrNoLastGood) || res.Text != "" {
			t.Fatalf("never answered: err %v, text %q", err, res.Text)
		}

		// An answer older than MaxAge is not served.
		time.Sleep(41 * time.Minute)
		if _, err := c.Call(t.Context(), ask); !errors.Is(err, degrade.ErrLastGoodTooOld) {
			t.Fatalf("61 minutes old: %v", err)
		}
	})
}

func TestLastGoodRevalidatesWhatItServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory(t)
		a, _, c := schemaChain(t, degrade.LastGoodConfig{Store: store})
		a.Script(sonnet, fake.Answer(good))
		if _, err := c.Call(t.Context(), ask); err != nil {
			t.Fatal(err)
		}
		// The schema changes: confidence must now be at least 0.95.
		stricter := []byte(strings.Replace(string(answerSchema), `"minimum": 0,`, `"minimum": 0.95,`, 1))
		f := fake.New()
		f.Script(sonnet, fake.Overloaded())
		c2, err := chain.New("support").Schema(stricter).
			Primary(chain.Target{Name: "sonnet", Provider: claude(t, f), Model: sonnet}).
			OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c2.Call(t.Context(), ask)
		if !errors.Is(err, validate.ErrInvalid) || res.Degraded {
			t.Fatalf("a remembered answer failing the new schema was served: %v %+v", err, res)
		}
	})
}

func TestDecodeReturnsTheTypedAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, o, c := schemaChain(t, degrade.LastGoodConfig{Store: memory(t)})
		a.Script(sonnet, fake.Answer(fenced))
		ans, res, err := chain.Decode[answer](t.Context(), c, ask)
		if err != nil || ans != (answer{"It ships today.", 0.9}) || res.Served.Target != "sonnet" {
			t.Fatalf("%+v %v", ans, err)
		}
		a.Script(sonnet, fake.Answer(bad))
		o.Script(gpt, fake.Answer(refusal))
		_, _, err = chain.Decode[answer](t.Context(), c, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "new"}}})
		if !errors.Is(err, validate.ErrInvalid) || !errors.Is(err, chain.ErrExhausted) {
			t.Fatalf("invalid everywhere: %v", err)
		}
	})
}

func TestDecodeReportsAGoTypeThatDisagreesWithTheSchema(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, _, c := schemaChain(t, degrade.LastGoodConfig{Store: memory(t)})
		a.Script(sonnet, fake.Answer(good))
		_, _, err := chain.Decode[struct{ Confidence string }](t.Context(), c, ask)
		if !errors.Is(err, validate.ErrTypeMismatch) || errors.Is(err, validate.ErrInvalid) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestStaticAnswerMustPassTheSchemaAtBuild(t *testing.T) {
	p := claude(t, fake.New())
	_, err := chain.New("support").Schema(answerSchema).
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet}).
		OrDegrade(degrade.Static(llm.Response{Text: "We are busy."})).Build()
	if !errors.Is(err, llm.ErrInvalidConfig) || !errors.Is(err, validate.ErrInvalid) ||
		!strings.Contains(err.Error(), `target "static": the Static answer does not pass the chain's Schema`) {
		t.Fatalf("got %v", err)
	}
	_, err = chain.New("support").Schema([]byte(`{"type": "nope"}`)).
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet}).Build()
	if !errors.Is(err, validate.ErrBadSchema) || !strings.Contains(err.Error(), "Schema is invalid") {
		t.Fatalf("bad schema: %v", err)
	}
	if _, err := chain.New("support").Schema(answerSchema).
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet}).
		OrDegrade(degrade.Static(llm.Response{Text: `{"answer": "We are busy; try again soon.", "confidence": 0}`})).Build(); err != nil {
		t.Fatal(err)
	}
}

func TestTargetSchemaOverridesTheChains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		f.Script(haiku, fake.Answer(`{"short": true}`))
		c, err := chain.New("support").Schema(answerSchema).
			Primary(chain.Target{Name: "haiku", Provider: claude(t, f), Model: haiku, Schema: []byte(`{"type": "object", "required": ["short"]}`)}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), ask)
		if err != nil || string(res.JSON) != `{"short": true}` {
			t.Fatalf("%v %s", err, res.JSON)
		}
	})
}

func TestLastGoodKeyFuncReplacesTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Key on the question's text, case-folded: "Where is my order?" and
		// "WHERE IS MY ORDER?" share one remembered answer.
		byText := degrade.LastGoodConfig{Store: memory(t), Key: func(_ context.Context, name string, req llm.Request) string {
			return name + "/" + strings.ToLower(req.Messages[len(req.Messages)-1].Content)
		}}
		a, o, c := schemaChain(t, byText)
		a.Script(sonnet, fake.Answer(good))
		if _, err := c.Call(t.Context(), ask); err != nil {
			t.Fatal(err)
		}
		a.Script(sonnet, fake.Overloaded())
		o.Script(gpt, fake.Overloaded())
		shout := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: strings.ToUpper(ask.Messages[0].Content)}}}
		if res, err := c.Call(t.Context(), shout); err != nil || !res.Degraded {
			t.Fatalf("%v %+v", err, res.Served)
		}
	})
}
