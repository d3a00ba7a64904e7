package openaisdk

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	native "github.com/backstop-llm/backstop/provider/openai"
)

// requests are conversations of every shape the adapters translate.
func requests() map[string]llm.Request {
	full := toolRequest()
	full.System = "Be brief."
	full.Params = llm.Params{MaxTokens: 10, Temperature: llm.Float(0), TopP: llm.Float(1), Stop: []string{"a", "b"},
		Extra: map[string]any{"seed": 1, "metadata": map[string]string{"k": "<v>"}}}
	full.ResponseSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"number","minimum":1e2}},"required":["n"],"additionalProperties":false}`)
	media := hello()
	media.Messages[0].Parts = []llm.Part{llm.ImagePart("image/jpeg", []byte("jpg")), llm.TextPart(" and "),
		llm.DocumentPart("application/pdf", []byte("pdf1")), llm.DocumentPart("application/pdf", []byte("pdf2")),
		llm.DocumentPart("text/markdown", []byte("# md")), llm.ImageURLPart("https://x.test/i.gif")}
	calls := hello()
	calls.Tools = []llm.Tool{{Name: "noargs"}, {Name: "f", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`)}}
	calls.ToolChoice = llm.ToolChoice{Mode: llm.ToolAny}
	calls.Messages = append(calls.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: "Let me check.", Parts: []llm.Part{llm.TextPart(" Now."),
			llm.ToolCallPart("toolu_01ABC", "f", nil), llm.ToolCallPart("call_ok", "noargs", json.RawMessage(`{}`))}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart("toolu_01ABC", "failed", true), llm.ToolResultPart("call_ok", "", false)}},
		llm.Message{Role: llm.RoleAssistant, Content: ""})
	none := calls
	none.ToolChoice = llm.ToolChoice{Mode: llm.ToolNone}
	return map[string]llm.Request{"hello": hello(), "full": full, "media": media, "calls": calls, "none": none}
}

// TestSameBodiesAsNative: for every request shape, Complete and Stream
// send the body the native adapter sends.
func TestSameBodiesAsNative(t *testing.T) {
	sse := suite.SSE(events(`{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`, "[DONE]"))
	whole := suite.Respond(200, chatOK, "Content-Type", "application/json")
	var s *suite.Server
	s = suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		if bytes.Contains(s.Last().Body, []byte(`"stream":true`)) {
			sse(w, r)
			return
		}
		whole(w, r)
	})
	mine := newProvider(t, s.URL, APIChat)
	theirs, err := native.New(native.Config{APIKey: testKey, BaseURL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	for name, req := range requests() {
		wantC, wantS := suite.Bodies(t, theirs, s, req)
		gotC, gotS := suite.Bodies(t, mine, s, req)
		if gotC["messages"] == nil || wantC["messages"] == nil || gotS["stream"] != true || wantS["stream"] != true {
			t.Fatalf("%s: bodies not recorded: %v %v", name, gotC, wantC)
		}
		if !reflect.DeepEqual(gotC, wantC) {
			t.Errorf("%s: Complete body\n got %s\nwant %s", name, mustJSON(gotC), mustJSON(wantC))
		}
		if !reflect.DeepEqual(gotS, wantS) {
			t.Errorf("%s: Stream body\n got %s\nwant %s", name, mustJSON(gotS), mustJSON(wantS))
		}
	}
}

// TestSameErrorsAsNative: error replies beyond the shared table are
// classified as the native adapter classifies them.
func TestSameErrorsAsNative(t *testing.T) {
	type reply struct {
		status int
		body   string
		header []string
	}
	for _, r := range []reply{
		{429, `{"error":{"message":"quota","type":"insufficient_quota","code":null}}`, nil},
		{400, `{"error":{"message":"m","type":"invalid_request_error","code":"invalid_image"}}`, nil},
		{403, `{"error":{"message":"country","type":"invalid_request_error","code":"unsupported_country_region_territory"}}`, nil},
		{503, `{"error":"unavailable"}`, []string{"Retry-After", "4"}},
		{500, `{"error":{"message":"m","type":"server_error","code":"flex_unavailable"}}`, []string{"X-Should-Retry", "false"}},
		{502, `<html>bad gateway</html>`, nil},
		{400, `{"error":{"message":"m","type":12,"code":34}}`, nil},
		{529, `{}`, nil},
		{429, `{"error":{"message":"m","type":"tokens","code":"rate_limit_exceeded"}}`, []string{"Retry-After-Ms", "250", "X-Ratelimit-Remaining-Tokens", "0"}},
	} {
		s := suite.NewServer(t, suite.Respond(r.status, r.body, append([]string{"X-Request-Id", "req_n"}, r.header...)...))
		theirs, _ := native.New(native.Config{APIKey: testKey, BaseURL: s.URL})
		want := suite.CompleteErr(t, theirs, context.Background(), hello(), testKey)
		got := suite.CompleteErr(t, newProvider(t, s.URL, APIChat), context.Background(), hello(), testKey)
		if got.Kind != want.Kind || got.Status != want.Status || got.Type != want.Type || got.Code != want.Code ||
			got.RequestID != want.RequestID || got.RetryAfter != want.RetryAfter || !reflect.DeepEqual(got.ShouldRetry, want.ShouldRetry) ||
			got.RateLimit.Tokens.Remaining != want.RateLimit.Tokens.Remaining || (got.Detail == "") != (want.Detail == "") {
			t.Errorf("%d %s:\n got %#v\nwant %#v", r.status, r.body, got, want)
		}
		var e *llm.Error
		if !errors.As(error(got), &e) {
			t.Fatal("not an *llm.Error")
		}
	}
}

// TestSameAnswersAsNative: answers and streams are read as the native
// adapter reads them: the same Response, the same chunks, the same
// failures.
func TestSameAnswersAsNative(t *testing.T) {
	for _, body := range []string{
		chatOK,
		`{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\": [1, 2]}"}},
			{"id":"call_2","type":"function","function":{"name":"g","arguments":""}},
			{"id":"call_3","type":"function","function":{"name":"h","arguments":{"obj":true}}},
			{"id":"call_4","type":"function","function":{"name":"i","arguments":"not json"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"cut"}}]}`,
	} {
		s := suite.NewServer(t, suite.Respond(200, body, "Content-Type", "application/json", "X-Request-Id", "req_a"))
		theirs, _ := native.New(native.Config{APIKey: testKey, BaseURL: s.URL})
		want, err := theirs.Complete(context.Background(), hello())
		if err != nil {
			t.Fatal(err)
		}
		got, err := newProvider(t, s.URL, APIChat).Complete(context.Background(), hello())
		if err != nil {
			t.Fatal(err)
		}
		got.RateLimit, want.RateLimit = llm.RateLimit{}, llm.RateLimit{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("answer\n got %+v\nwant %+v", got, want)
		}
	}
	for name, pieces := range map[string][]string{
		"tools": events(
			`{"id":"s","model":"m","choices":[{"index":0,"delta":{"content":"a"}}]}`,
			`{"id":"s","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","function":{"name":"f","arguments":"{\"x\""}}]}}]}`,
			`{"id":"s","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]}}]}`,
			`{"id":"s","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_b","function":{"name":"g","arguments":""}}]}}]}`,
			`{"id":"s","choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"tool_calls"}]}`,
			`{"id":"s","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`, `[DONE]`),
		"error": events(`{"id":"s","choices":[{"index":0,"delta":{"content":"a"}}]}`,
			`{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}`),
		"refusal": events(`{"id":"s","choices":[{"index":0,"delta":{"refusal":"no"}}]}`,
			`{"id":"s","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`),
		"filter": events(`{"id":"s","choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"content_filter"}]}`, `[DONE]`),
	} {
		s := suite.NewServer(t, suite.SSE(pieces, "X-Request-Id", "req_s"))
		theirs, _ := native.New(native.Config{APIKey: testKey, BaseURL: s.URL})
		wantT, wantC, wantErr, wantRes := readStream(t, theirs, hello())
		gotT, gotC, gotErr, gotRes := readStream(t, newProvider(t, s.URL, APIChat), hello())
		if !reflect.DeepEqual(gotT, wantT) || !reflect.DeepEqual(gotC, wantC) || !reflect.DeepEqual(gotRes, wantRes) {
			t.Errorf("%s:\n got %q %+v %+v\nwant %q %+v %+v", name, gotT, gotC, gotRes, wantT, wantC, wantRes)
		}
		var ge, we *llm.Error
		if errors.As(gotErr, &ge) != errors.As(wantErr, &we) || ge != nil &&
			(ge.Kind != we.Kind || ge.Status != we.Status || ge.Code != we.Code || ge.RequestID != we.RequestID || ge.Detail != we.Detail) {
			t.Errorf("%s: error\n got %#v\nwant %#v", name, gotErr, wantErr)
		}
	}
}

func readStream(t *testing.T, p llm.StreamProvider, req llm.Request) ([]string, []llm.ToolCall, error, llm.Response) {
	st := suite.OpenStream(t, p, context.Background(), req)
	texts, calls, err := readAll(st)
	res := *st.Response()
	res.RateLimit = llm.RateLimit{}
	return texts, calls, err, res
}
