package suite

// The adapters the suite drives, and what each needs to be driven: how to
// build one, and the bodies and events of its wire format that the shared
// tests send it.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/openai"
)

// Realistic keys, one of each provider's shape.
const (
	anthropicKey = "sk-ant-api03-TESTKEY-0123456789abcdef"
	openaiKey    = "sk-proj-TESTKEY-0123456789abcdef"
)

// prompt and answer stand for content that must not reach an error's text.
const (
	prompt = "PROMPT-my-card-is-4111-1111-1111-1111"
	answer = "ANSWER-the-diagnosis-is-confidential"
)

// config is what the suite sets of an adapter's Config.
type config struct {
	key      string
	base     string
	client   *http.Client
	maxBytes int64
	header   http.Header
}

// malformed is a body an adapter cannot use, the Kind its error must have
// and what its message or Detail must contain.
type malformed struct {
	name   string
	status int
	body   string
	kind   llm.Kind
	quote  string
}

// adapter is one HTTP adapter as the suite drives it.
type adapter struct {
	name string
	// key is a key of the provider's shape, the one new configures.
	key string
	// open returns the adapter configured by c.
	open func(c config) (llm.StreamProvider, error)
	// defaultURL is where it sends with no BaseURL.
	defaultURL string
	// requestID is the response header holding the request id.
	requestID string
	// rateHeaders announce a token bucket of 1000, none remaining, reset
	// later; reset is when, as its reset header says it.
	rateHeaders []string

	// ok is a whole success body answering text.
	ok func(text string) string
	// noAnswer is what the error says of a 200 without an answer.
	noAnswer string
	// fail is the error body the provider sends for kind (KindUnknown: of
	// an error type it does not know) with msg as its message.
	fail func(kind llm.Kind, msg string) string
	// everyField is an error body with s in every text field.
	everyField func(s string) string
	// refusal is a 200 whose answer the model declined, quoting text.
	refusal func(text string) string
	// malformed are bodies of its own wire format it cannot use.
	malformed []malformed

	// start opens a streamed answer, text(s) delivers s, end ends it.
	start string
	text  func(s string) string
	end   string
	// unfinished are endings of a stream that leave the answer incomplete.
	unfinished map[string]string
	// whole are endings that say the answer finished but lack the
	// sentinel that usually follows (message_stop, [DONE]), the body then
	// ending cleanly: the answer is complete.
	whole map[string]string
	// badEvents are events that are not the expected JSON, and
	// badEventMessage what the error says of them.
	badEvents       map[string]string
	badEventMessage string
	// badEvent is an event stream whose first event carries text in data
	// that is not the expected JSON.
	badEvent func(text string) string
	// errorEvent reports a failure of kind errorKind mid-stream.
	errorEvent string
	errorKind  llm.Kind
	// events is a whole event stream whose answer's id and model carry
	// echo.
	events func(echo string) string

	// header is a Config.Header of a header the provider documents, sent
	// the headers every request carries (the key's among them) and path
	// where it goes under the BaseURL.
	header http.Header
	sent   map[string]string
	path   string
	// extra is the Params.Extra of shapeRequest, overriding one of its
	// fields; shape the body that request is sent as, plain the body of
	// the suite's request (nothing unset is sent).
	extra        map[string]any
	shape, plain map[string]any
	// streamFields are what a Stream's body adds to Complete's.
	streamFields map[string]any
	// multiLine is a text event whose data spans lines, delivering
	// "two\nlines".
	multiLine string
	// errorEvents are error events of its wire format that fail a stream
	// after its text, each with the error it must fail with.
	errorEvents []errorEvent
}

// errorEvent is an error event and the error a stream must fail with.
type errorEvent struct {
	name, event string
	kind        llm.Kind
	typ, code   string
	// detail, when set, is the provider's message, which the error must
	// hold in Detail only.
	detail string
}

// opener is an adapter's open: its New given the Config that cfg makes of
// a config (an error is returned as is, never as a typed nil provider).
func opener[C any, P llm.StreamProvider](New func(C) (P, error), cfg func(config) C) func(config) (llm.StreamProvider, error) {
	return func(c config) (llm.StreamProvider, error) {
		p, err := New(cfg(c))
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// new returns a configured with its key, sending to base with client (nil
// for none).
func (a adapter) new(t testing.TB, base string, client *http.Client) llm.StreamProvider {
	t.Helper()
	return a.with(t, config{key: a.key, base: base, client: client})
}

// with returns a configured by c.
func (a adapter) with(t testing.TB, c config) llm.StreamProvider {
	t.Helper()
	p, err := a.open(c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// completeErr runs one Complete of p that must fail and returns its error.
func (a adapter) completeErr(t testing.TB, p llm.Provider, ctx context.Context) *llm.Error {
	t.Helper()
	return CompleteErr(t, p, ctx, request, a.key)
}

// streamFails reads s, which must fail after the chunks want.
func (a adapter) streamFails(t testing.TB, s llm.Stream, want ...string) *llm.Error {
	t.Helper()
	return StreamFails(t, s, a.name, a.key, want...)
}

// stream is an answer streamed as the events of a: start, one text event
// per piece, end.
func (a adapter) stream(pieces ...string) []string {
	s := []string{a.start}
	for _, p := range pieces {
		s = append(s, a.text(p))
	}
	return append(s, a.end)
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// event is one server-sent event as Anthropic writes it; data one as
// OpenAI does.
func event(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
func data(s string) string           { return "data: " + s + "\n\n" }

func anthropicError(typ, msg, details string) string {
	return `{"type":"error","error":{"type":"` + typ + `","message":` + jsonString(msg) + details + `},"request_id":"req_body"}`
}

func openaiError(typ, code, msg string) string {
	c := "null"
	if code != "" {
		c = jsonString(code)
	}
	return `{"error":{"message":` + jsonString(msg) + `,"type":"` + typ + `","param":null,"code":` + c + `}}`
}

// openaiChunk is a chat.completion.chunk for choice 0 with the delta
// content text and finish reason (null when empty).
func openaiChunk(text, finish string) string {
	fr, delta := "null", "{}"
	if finish != "" {
		fr = jsonString(finish)
	}
	if text != "" {
		delta = `{"content":` + jsonString(text) + `}`
	}
	return data(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test","system_fingerprint":"fp_1","choices":[{"index":0,"delta":` +
		delta + `,"logprobs":null,"finish_reason":` + fr + `}],"usage":null}`)
}

var adapters = []adapter{
	{
		name: "anthropic",
		key:  anthropicKey,
		open: opener(anthropic.New, func(c config) anthropic.Config {
			return anthropic.Config{APIKey: c.key, BaseURL: c.base, HTTPClient: c.client, MaxResponseBytes: c.maxBytes, Header: c.header}
		}),
		defaultURL: "https://api.anthropic.com" + "/v1/messages",
		requestID:  "Request-Id",
		rateHeaders: []string{"anthropic-ratelimit-tokens-limit", "1000", "anthropic-ratelimit-tokens-remaining", "0",
			"anthropic-ratelimit-tokens-reset", "2026-11-30T16:00:00Z"},
		ok: func(text string) string {
			return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":` +
				jsonString(text) + `}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`
		},
		noAnswer: `no "content" array`,
		fail: func(kind llm.Kind, msg string) string {
			switch kind {
			case llm.KindRateLimited:
				return anthropicError("rate_limit_error", msg, "")
			case llm.KindQuota:
				return anthropicError("rate_limit_error", msg, `,"details":{"error_code":"enforced_spend_limit_reached"}`)
			case llm.KindOverloaded:
				return anthropicError("overloaded_error", msg, "")
			case llm.KindServer:
				return anthropicError("api_error", msg, "")
			case llm.KindAuth:
				return anthropicError("authentication_error", msg, "")
			case llm.KindContextLength:
				return anthropicError("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum; "+msg, "")
			case llm.KindBadRequest:
				return anthropicError("invalid_request_error", msg, "")
			}
			return anthropicError("brand_new_error", msg, "")
		},
		everyField: func(s string) string {
			return `{"type":"error","error":{"type":"` + s + `","message":"` + s + `","details":{"error_code":"` + s + `"}},"request_id":"` + s + `"}`
		},
		refusal: func(text string) string {
			return `{"id":"m","type":"message","model":"m","content":[{"type":"text","text":` + jsonString(text) + `}],"stop_reason":"refusal","usage":{}}`
		},
		malformed: []malformed{
			{"wrong types 200", 200, `{"content":"text","usage":{"input_tokens":"many"}}`, llm.KindServer, "not the expected JSON"},
			{"wrong shape 400", 400, `{"error":"bad"}`, llm.KindBadRequest, "not the expected JSON"},
		},
		start: event("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","content":[],"model":"claude-test","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}`) +
			event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
		text: func(s string) string {
			return event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+jsonString(s)+`}}`)
		},
		end: event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`) +
			event("message_stop", `{"type":"message_stop"}`),
		unfinished: map[string]string{
			"no message_delta": event("content_block_stop", `{"type":"content_block_stop","index":0}`),
		},
		whole: map[string]string{
			"no message_stop": event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`),
		},
		badEvents: map[string]string{
			"syntax":       event("content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":"x"`),
			"wrong type":   event("content_block_delta", `{"type":"content_block_delta","delta":{"type":"text_delta","text":5}}`),
			"wrong shape":  event("message_delta", `{"type":"message_delta","usage":"many"}`),
			"no event":     "data: not JSON\n\n",
			"key in event": event("message_start", `{"message":"`+anthropicKey+`"}`),
		},
		badEventMessage: "is not the expected JSON",
		badEvent: func(text string) string {
			return "event: content_block_delta\ndata: {\"delta\": " + text + "\n\n"
		},
		errorEvent: event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
		errorKind:  llm.KindOverloaded,
		events: func(echo string) string {
			return event("message_start", `{"type":"message_start","message":{"id":"msg_`+echo+`","model":"claude-`+echo+`","usage":{"input_tokens":1}}}`) +
				event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"fine"}}`) +
				event("message_stop", `{"type":"message_stop"}`)
		},
		header: http.Header{"anthropic-beta": {"b1"}},
		sent: map[string]string{"X-Api-Key": anthropicKey, "Anthropic-Version": "2023-06-01",
			"Content-Type": "application/json", "Anthropic-Beta": "b1"},
		path:  "/v1/messages",
		extra: map[string]any{"metadata": map[string]string{"user_id": "u1"}, "top_p": 0.5},
		shape: map[string]any{
			"model":      "m",
			"max_tokens": 300.0,
			"system":     "Be <brief> & kind.",
			"messages": []any{
				map[string]any{"role": "user", "content": "Hi"},
				map[string]any{"role": "assistant", "content": "Hello"},
				map[string]any{"role": "user", "content": "Again"},
			},
			"temperature":    0.0,
			"top_p":          0.5, // Extra overrides
			"stop_sequences": []any{"END"},
			"metadata":       map[string]any{"user_id": "u1"},
		},
		plain: map[string]any{"model": "m", "max_tokens": float64(1024),
			"messages": []any{map[string]any{"role": "user", "content": prompt}}},
		streamFields: map[string]any{"stream": true},
		multiLine:    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\ndata: \"index\":0,\"delta\":{\"type\":\"text_delta\",\ndata: \"text\":\"two\\nlines\"}}\n\n",
		errorEvents: []errorEvent{
			{"overloaded", event("error", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`), llm.KindOverloaded, "overloaded_error", "", "Overloaded"},
			{"api error", event("error", `{"type":"error","error":{"details":null,"type":"api_error","message":"Internal server error"}}`), llm.KindServer, "api_error", "", ""},
			{"rate limit", event("error", `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`), llm.KindRateLimited, "rate_limit_error", "", ""},
			{"spend limit", event("error", `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}}`), llm.KindQuota, "rate_limit_error", "enforced_spend_limit_reached", ""},
			{"contract spend limit", event("error", `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"contract_spend_limit_reached"}}}`), llm.KindQuota, "rate_limit_error", "contract_spend_limit_reached", ""},
			{"ramp limit", event("error", `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"ramp_limit_exceeded"}}}`), llm.KindRateLimited, "rate_limit_error", "ramp_limit_exceeded", ""},
			{"unknown type", event("error", `{"type":"error","error":{"type":"brand_new_error","message":"?"}}`), llm.KindServer, "brand_new_error", "", ""},
			{"unparseable", event("error", `Overloaded`), llm.KindServer, "", "", ""},
			{"key in message", event("error", `{"type":"error","error":{"type":"overloaded_error","message":"`+anthropicKey+`"}}`), llm.KindOverloaded, "overloaded_error", "", ""},
		},
	},
	{
		name: "openai",
		key:  openaiKey,
		open: opener(openai.New, func(c config) openai.Config {
			return openai.Config{APIKey: c.key, BaseURL: c.base, HTTPClient: c.client, MaxResponseBytes: c.maxBytes, Header: c.header}
		}),
		defaultURL: "https://api.openai.com/v1/chat/completions",
		requestID:  "X-Request-Id",
		rateHeaders: []string{"x-ratelimit-limit-tokens", "1000", "x-ratelimit-remaining-tokens", "0",
			"x-ratelimit-reset-tokens", "1.574s"},
		ok: func(text string) string {
			return `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":` +
				jsonString(text) + `},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
		},
		noAnswer: `no "choices"`,
		fail: func(kind llm.Kind, msg string) string {
			switch kind {
			case llm.KindRateLimited:
				return openaiError("requests", "rate_limit_exceeded", msg)
			case llm.KindQuota:
				return openaiError("insufficient_quota", "insufficient_quota", msg)
			case llm.KindOverloaded, llm.KindServer:
				return openaiError("server_error", "", msg)
			case llm.KindAuth:
				return openaiError("invalid_request_error", "invalid_api_key", msg)
			case llm.KindContextLength:
				return openaiError("invalid_request_error", "context_length_exceeded", msg)
			case llm.KindBadRequest:
				return openaiError("invalid_request_error", "", msg)
			}
			return openaiError("brand_new_error", "", msg)
		},
		everyField: func(s string) string {
			return `{"error":{"message":"` + s + `","type":"` + s + `","param":"` + s + `","code":"` + s + `"}}`
		},
		refusal: func(text string) string {
			return `{"choices":[{"message":{"refusal":` + jsonString(text) + `}}]}`
		},
		malformed: []malformed{
			{"no choices 200", 200, `{"id":"x","choices":[]}`, llm.KindServer, `no "choices"`},
			{"wrong types 200", 200, `{"choices":[{"message":{"content":["a"]}}]}`, llm.KindServer, "not the expected JSON"},
			{"error message number 400", 400, `{"error":{"message":5}}`, llm.KindBadRequest, "not the expected JSON"},
		},
		start: data(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`),
		text:  func(s string) string { return openaiChunk(s, "") },
		end: openaiChunk("", "stop") +
			data(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`) +
			data("[DONE]"),
		unfinished: map[string]string{
			"[DONE] cut":             "data: [DONE]\n",
			"usage without a finish": data(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`),
		},
		whole: map[string]string{
			"no [DONE]": openaiChunk("", "stop"),
			"no [DONE], after the usage": openaiChunk("", "stop") +
				data(`{"id":"chatcmpl-01","object":"chat.completion.chunk","created":1,"model":"gpt-test","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":5,"total_tokens":25}}`),
		},
		badEvents: map[string]string{
			"syntax":      data(`{"choices":[{"index":0,"delta":{"content":"x"`),
			"wrong type":  data(`{"choices":[{"index":0,"delta":{"content":5}}]}`),
			"not object":  data(`[1,2]`),
			"done typo":   data(`[DONE`),
			"html":        data(`<html>`),
			"key in data": data(`{"choices":"` + openaiKey + `"}`),
		},
		badEventMessage: `event "message" is not the expected JSON`,
		badEvent: func(text string) string {
			return "data: {\"choices\": " + text + "\n\n"
		},
		errorEvent: data(openaiError("tokens", "rate_limit_exceeded", "slow")),
		errorKind:  llm.KindRateLimited,
		events: func(echo string) string {
			return data(`{"id":"chatcmpl-`+echo+`","model":"gpt-`+echo+`","choices":[{"index":0,"delta":{"content":"fine"}}]}`) +
				data("[DONE]")
		},
		header: http.Header{"OpenAI-Project": {"proj_1"}},
		sent:   map[string]string{"Authorization": "Bearer " + openaiKey, "Content-Type": "application/json", "Openai-Project": "proj_1"},
		path:   "/v1/chat/completions",
		extra:  map[string]any{"seed": 7, "temperature": 1.5, "response_format": map[string]string{"type": "json_object"}},
		shape: map[string]any{
			"model": "m",
			"messages": []any{
				map[string]any{"role": "system", "content": "Be <brief> & kind."},
				map[string]any{"role": "user", "content": "Hi"},
				map[string]any{"role": "assistant", "content": "Hello"},
				map[string]any{"role": "user", "content": "Again"},
			},
			"max_completion_tokens": 300.0,
			"temperature":           1.5, // Extra overrides
			"top_p":                 0.9,
			"stop":                  []any{"END"},
			"seed":                  7.0,
			"response_format":       map[string]any{"type": "json_object"},
		},
		plain:        map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": prompt}}},
		streamFields: map[string]any{"stream": true, "stream_options": map[string]any{"include_usage": true}},
		multiLine:    "data: {\"id\":\"chatcmpl-01\",\ndata: \"choices\":[{\"index\":0,\ndata: \"delta\":{\"content\":\"two\\nlines\"}}]}\n\n",
		errorEvents: []errorEvent{
			{"server error", data(`{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`), llm.KindServer, "server_error", "", ""},
			{"rate limit", data(openaiError("tokens", "rate_limit_exceeded", "Rate limit reached")), llm.KindRateLimited, "tokens", "rate_limit_exceeded", ""},
			{"quota", data(openaiError("insufficient_quota", "insufficient_quota", "quota")), llm.KindQuota, "insufficient_quota", "insufficient_quota", ""},
			{"error event type", "event: error\ndata: " + openaiError("server_error", "", "boom") + "\n\n", llm.KindServer, "server_error", "", ""},
			{"error event without an error object", "event: error\ndata: {\"message\":\"boom\"}\n\n", llm.KindServer, "", "", ""},
			{"string error", data(`{"error":"model overloaded"}`), llm.KindServer, "", "", ""},
			{"key in message", data(openaiError("invalid_request_error", "", "key "+openaiKey)), llm.KindServer, "invalid_request_error", "", ""},
		},
	},
}

var request = llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: prompt}}}

// forEach runs test against every adapter, as a subtest named after it.
func forEach(t *testing.T, test func(t *testing.T, a adapter)) {
	for _, a := range adapters {
		t.Run(a.name, func(t *testing.T) { test(t, a) })
	}
}

// attempt runs one Complete, or one Stream read to its end, and returns its
// error.
func attempt(p llm.StreamProvider, stream bool) error {
	ctx := context.Background()
	if !stream {
		_, err := p.Complete(ctx, request)
		return err
	}
	s, err := p.Stream(ctx, request)
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		if _, err := s.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

func llmError(t *testing.T, err error) *llm.Error {
	t.Helper()
	var le *llm.Error
	if !errors.As(err, &le) {
		t.Fatalf("error %v (%T) is not an *llm.Error", err, err)
	}
	return le
}
