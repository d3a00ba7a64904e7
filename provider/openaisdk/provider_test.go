package openaisdk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testKey is the key the test clients send; errors must never quote it.
const testKey = "sk-test-0123456789abcdefghij"

// newProvider returns a Provider over a client retrying 5 times (which the
// adapter must override) pointed at s, calling api.
func newProvider(t testing.TB, url, api string, extra ...option.RequestOption) *Provider {
	t.Helper()
	opts := append([]option.RequestOption{option.WithAPIKey(testKey), option.WithBaseURL(url + "/v1"),
		// 5 retries with short waits: were the adapter not to switch them
		// off, the counts would show it at once.
		option.WithMaxRetries(5), option.WithMaxRetryDelay(time.Millisecond)}, extra...)
	p, err := New(openai.NewClient(opts...), Config{API: api, APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var apis = []string{APIChat, APIResponses}

func hello() llm.Request {
	return llm.Request{Model: "gpt-4o", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}
}

// TestClasses: every error class of the shared table is classified as the
// native adapter classifies it (Kind, Status, RetryAfter, RequestID), on
// both APIs, with one request each although the client retries 5 times.
func TestClasses(t *testing.T) {
	for _, api := range apis {
		for _, c := range suite.Classes("openai") {
			s := suite.NewServer(t, suite.Respond(c.Status, c.Body, append([]string{"X-Request-Id", "req_hdr"}, c.Header...)...))
			p := newProvider(t, s.URL, api)
			e := suite.CompleteErr(t, p, context.Background(), hello(), testKey)
			if e.Kind != c.Kind || e.Status != c.Status || e.RequestID != "req_hdr" {
				t.Errorf("%s %s: kind %v status %d id %q; want %v %d req_hdr", api, c.Name, e.Kind, e.Status, e.RequestID, c.Kind, c.Status)
			}
			if want := time.Duration(c.RetryAfterSeconds) * time.Second; e.RetryAfter.Truncate(time.Second) != want {
				t.Errorf("%s %s: RetryAfter %v; want %v", api, c.Name, e.RetryAfter, want)
			}
			if e.Detail == "" || e.Type == "" && e.Code == "" {
				t.Errorf("%s %s: no type, code or detail: %#v", api, c.Name, e)
			}
			if n := s.Count.Load(); n != 1 {
				t.Errorf("%s %s: %d requests; want 1", api, c.Name, n)
			}
			// The same classes before a stream starts.
			st, err := p.Stream(context.Background(), hello())
			if err == nil {
				st.Close()
				t.Fatalf("%s %s: Stream started", api, c.Name)
			}
			var se *llm.Error
			if !errors.As(err, &se) || se.Kind != c.Kind || se.Status != c.Status || se.RequestID != "req_hdr" {
				t.Errorf("%s %s: Stream error %#v", api, c.Name, err)
			}
			if n := s.Count.Load(); n != 2 {
				t.Errorf("%s %s: %d requests after Stream; want 2", api, c.Name, n)
			}
		}
	}
}

// TestOneRequest: a client set to retry 5 times sends exactly one request
// through the adapter, where the same client called directly retries.
func TestOneRequest(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(500, `{"error":{"message":"boom","type":"server_error","code":null}}`))
	for _, api := range apis {
		p := newProvider(t, s.URL, api)
		before := s.Count.Load()
		e := suite.CompleteErr(t, p, context.Background(), hello(), testKey)
		if e.Kind != llm.KindServer || s.Count.Load()-before != 1 {
			t.Errorf("%s: kind %v after %d requests; want server after 1", api, e.Kind, s.Count.Load()-before)
		}
	}
	// The control: the client itself would retry (with its backoff cut
	// short by a short max delay).
	c := openai.NewClient(option.WithAPIKey(testKey), option.WithBaseURL(s.URL+"/v1"), option.WithMaxRetries(2),
		option.WithMaxRetryDelay(time.Millisecond))
	before := s.Count.Load()
	_, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "m",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hi")}})
	if err == nil || s.Count.Load()-before != 3 {
		t.Errorf("direct SDK call: %v after %d requests; want an error after 3", err, s.Count.Load()-before)
	}
}

const chatOK = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hello!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0}}}`

const responsesOK = `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o-2024-08-06","output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello!","annotations":[]}]}],"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":4},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12}}`

var okHeaders = []string{"Content-Type", "application/json", "X-Request-Id", "req_ok",
	"X-Ratelimit-Limit-Requests", "500", "X-Ratelimit-Remaining-Requests", "499", "X-Ratelimit-Reset-Requests", "120ms",
	"X-Ratelimit-Limit-Tokens", "30000", "X-Ratelimit-Remaining-Tokens", "29000", "X-Ratelimit-Reset-Tokens", "2s"}

// TestAnswer: the answer's text, model, id, usage and finish, its request
// id and the rate limit announced in the headers, on both APIs.
func TestAnswer(t *testing.T) {
	for api, body := range map[string]string{APIChat: chatOK, APIResponses: responsesOK} {
		s := suite.NewServer(t, suite.Respond(200, body, okHeaders...))
		p := newProvider(t, s.URL, api)
		start := time.Now()
		res, err := p.Complete(context.Background(), hello())
		if err != nil {
			t.Fatalf("%s: %v", api, err)
		}
		if res.Text != "Hello!" || res.Model != "gpt-4o-2024-08-06" || res.RequestID != "req_ok" || res.Finish != llm.FinishStop ||
			res.Usage != (llm.Usage{InputTokens: 9, OutputTokens: 3, CacheReadTokens: 4}) || res.ID == "" {
			t.Errorf("%s: %+v", api, res)
		}
		rl := res.RateLimit
		if rl.Requests.Limit != 500 || rl.Requests.Remaining != 499 || rl.Tokens.Limit != 30000 || rl.Tokens.Remaining != 29000 ||
			rl.Tokens.Reset.Sub(start) < 2*time.Second || rl.Tokens.Reset.Sub(start) > 3*time.Second {
			t.Errorf("%s: rate limit %+v", api, rl)
		}
		want := map[string]string{APIChat: "/v1/chat/completions", APIResponses: "/v1/responses"}[api]
		if got := s.Last(); got.Path != want || got.Header.Get("Authorization") != "Bearer "+testKey {
			t.Errorf("%s: sent to %s with %q", api, got.Path, got.Header.Get("Authorization"))
		}
	}
}

// TestChatBody: the Chat Completions body carries what the native
// adapter's does.
func TestChatBody(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, chatOK, "Content-Type", "application/json"))
	p := newProvider(t, s.URL, APIChat)
	req := llm.Request{
		Model: "gpt-4o", System: "Be brief.",
		Params: llm.Params{MaxTokens: 100, Temperature: llm.Float(0), TopP: llm.Float(0.5), Stop: []string{"END"},
			Extra: map[string]any{"seed": 7, "a.b": "dotted", "user": nil}},
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Look:", Parts: []llm.Part{
			llm.ImagePart("image/png", []byte{1, 2}),
			llm.ImageURLPart("https://example.com/a.png"),
			llm.DocumentPart("application/pdf", []byte("%PDF")),
			llm.DocumentPart("text/plain", []byte("notes")),
		}}},
		ResponseSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`),
	}
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, s.Last().Body, `{
		"model":"gpt-4o","max_completion_tokens":100,"temperature":0,"top_p":0.5,"stop":["END"],
		"seed":7,"a.b":"dotted","user":null,
		"messages":[
			{"role":"system","content":"Be brief."},
			{"role":"user","content":[
				{"type":"text","text":"Look:"},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,AQI="}},
				{"type":"image_url","image_url":{"url":"https://example.com/a.png"}},
				{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERg==","filename":"document-1.pdf"}},
				{"type":"text","text":"notes"}]}],
		"response_format":{"type":"json_schema","json_schema":{"name":"response","strict":true,
			"schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}}}}`)
	// A document by URL cannot go to Chat Completions: nothing is sent.
	n := s.Count.Load()
	bad := hello()
	bad.Messages[0].Parts = []llm.Part{llm.DocumentURLPart("https://example.com/a.pdf")}
	if e := suite.CompleteErr(t, p, context.Background(), bad, testKey); e.Kind != llm.KindBadRequest || s.Count.Load() != n {
		t.Errorf("document URL: %v after %d requests", e, s.Count.Load()-n)
	}
}

func decode(t testing.TB, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return m
}

// sameJSON checks that the request body got is the JSON want.
func sameJSON(t *testing.T, got []byte, want string) {
	t.Helper()
	if w := decode(t, []byte(want)); !reflect.DeepEqual(decode(t, got), w) {
		t.Errorf("body\n got %s\nwant %s", got, mustJSON(w))
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// foreignID is a tool-call id OpenAI would refuse (another provider's,
// too long): it goes out translated and comes back as the caller's; a new
// call echoing it comes back as echoedID, the caller's id renamed since
// the history holds it (see wire.CallIDs).
const (
	foreignID = "functions.get_weather:0-this-id-is-longer-than-forty-bytes"
	echoedID  = foreignID + "_2"
)

// toolRequest is a conversation with a tool call and its result, and the
// tools to call again.
func toolRequest() llm.Request {
	return llm.Request{Model: "gpt-4o",
		Tools: []llm.Tool{{Name: "get_weather", Description: "Weather in a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		ToolChoice: llm.UseTool("get_weather"),
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Weather in Paris?"},
			{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(foreignID, "get_weather", json.RawMessage(`{"city":"Paris"}`))}},
			{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(foreignID, "sunny", false), llm.TextPart("And Rome?")}},
		}}
}

// TestChatTools: tools, tool_choice, the assistant's tool calls and the
// tool results go out as the native adapter sends them, the long id
// translated; the answer's calls come back with the caller's id, their
// arguments kept valid JSON.
func TestChatTools(t *testing.T) {
	var out string
	s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-2","model":"gpt-4o","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"`+out+`","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}},
			{"id":"call_2","type":"function","function":{"name":"get_weather","arguments":"{broken"}},
			{"id":"call_3","type":"function","function":{"name":"","arguments":"{}"}}]}}]}`)
	})
	p := newProvider(t, s.URL, APIChat)
	ids := openaiwire.ToolIDs()
	out = ids.Out(foreignID)
	if len(out) > 40 || !strings.HasPrefix(out, "call_") {
		t.Fatalf("translated id %q", out)
	}
	res, err := p.Complete(context.Background(), toolRequest())
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, s.Last().Body, `{"model":"gpt-4o",
		"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather in a city",
			"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],
		"tool_choice":{"type":"function","function":{"name":"get_weather"}},
		"messages":[
			{"role":"user","content":"Weather in Paris?"},
			{"role":"assistant","tool_calls":[{"id":"`+out+`","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			{"role":"tool","tool_call_id":"`+out+`","content":"sunny"},
			{"role":"user","content":[{"type":"text","text":"And Rome?"}]}]}`)
	wantCalls := []llm.ToolCall{
		{ID: echoedID, Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)},
		{ID: "call_2", Name: "get_weather", Arguments: json.RawMessage(`"{broken"`)},
	}
	if !reflect.DeepEqual(res.ToolCalls, wantCalls) || res.Finish != llm.FinishToolUse || res.FinishReason != "tool_calls" {
		t.Errorf("calls %+v finish %v", res.ToolCalls, res.Finish)
	}
}

// TestResponsesTools: the same conversation as Responses API input items
// (function_call, function_call_output), tools with strict false, a named
// tool_choice and text.format; the answer's function calls come back with
// the caller's ids.
func TestResponsesTools(t *testing.T) {
	ids := openaiwire.ToolIDs()
	out := ids.Out(foreignID)
	s := suite.NewServer(t, suite.Respond(200, `{"id":"resp_2","object":"response","status":"completed","model":"gpt-4o","output":[
		{"type":"function_call","id":"fc_1","call_id":"`+out+`","name":"get_weather","arguments":"{\"city\":\"Rome\"}","status":"completed"},
		{"type":"function_call","id":"fc_2","call_id":"call_9","name":"get_weather","arguments":"","status":"completed"}],
		"usage":{"input_tokens":20,"output_tokens":10,"total_tokens":30}}`, "Content-Type", "application/json"))
	p := newProvider(t, s.URL, APIResponses)
	req := toolRequest()
	req.System = "Be brief."
	req.Params.MaxTokens = 50
	req.ResponseSchema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, s.Last().Body, `{"model":"gpt-4o","instructions":"Be brief.","max_output_tokens":50,
		"tools":[{"type":"function","name":"get_weather","description":"Weather in a city","strict":false,
			"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
		"tool_choice":{"type":"function","name":"get_weather"},
		"text":{"format":{"type":"json_schema","name":"response","strict":true,"schema":{"type":"object","properties":{},"additionalProperties":false}}},
		"input":[
			{"role":"user","content":"Weather in Paris?"},
			{"type":"function_call","call_id":"`+out+`","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},
			{"type":"function_call_output","call_id":"`+out+`","output":"sunny"},
			{"role":"user","content":[{"type":"input_text","text":"And Rome?"}]}]}`)
	wantCalls := []llm.ToolCall{
		{ID: echoedID, Name: "get_weather", Arguments: json.RawMessage(`{"city":"Rome"}`)},
		{ID: "call_9", Name: "get_weather", Arguments: json.RawMessage(`{}`)},
	}
	if !reflect.DeepEqual(res.ToolCalls, wantCalls) || res.Finish != llm.FinishToolUse || res.Usage.InputTokens != 20 {
		t.Errorf("answer %+v", res)
	}
}

// TestRefusal: a refusal and a content-filtered answer are
// KindContentFilter errors, the refusal's text in Detail only.
func TestRefusal(t *testing.T) {
	for api, body := range map[string]string{
		APIChat:      `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":null,"refusal":"I can't help with that."}}]}`,
		APIResponses: `{"id":"r","status":"completed","model":"m","output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"I can't help with that."}]}]}`,
	} {
		s := suite.NewServer(t, suite.Respond(200, body, "Content-Type", "application/json", "X-Request-Id", "req_r"))
		e := suite.CompleteErr(t, newProvider(t, s.URL, api), context.Background(), hello(), testKey)
		if e.Kind != llm.KindContentFilter || e.Code != "refusal" || e.Detail != "I can't help with that." || e.RequestID != "req_r" ||
			strings.Contains(e.Error(), "help") {
			t.Errorf("%s: %#v", api, e)
		}
	}
	s := suite.NewServer(t, suite.Respond(200, `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":""}}]}`,
		"Content-Type", "application/json"))
	if e := suite.CompleteErr(t, newProvider(t, s.URL, APIChat), context.Background(), hello(), testKey); e.Kind != llm.KindContentFilter {
		t.Errorf("content_filter: %#v", e)
	}
}

// TestBodies: bodies that are not the expected JSON are classified by
// status and quoted in Detail, the key redacted everywhere.
func TestBodies(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
		kind   llm.Kind
	}{
		{502, "<html>Bad gateway " + testKey + "</html>", llm.KindServer},
		{429, `{"error":"slow down ` + testKey + `"}`, llm.KindRateLimited},
		{400, `{"error":{"message":"bad key ` + testKey + `","type":"invalid_request_error","code":400}}`, llm.KindBadRequest},
		{200, `{"error":{"message":"overloaded","type":"server_error","code":"server_overloaded"}}`, llm.KindOverloaded},
		{200, `{"id":"x","choices":[]}`, llm.KindServer},
	} {
		s := suite.NewServer(t, suite.Respond(c.status, c.body, "Content-Type", "application/json"))
		e := suite.CompleteErr(t, newProvider(t, s.URL, APIChat), context.Background(), hello(), testKey)
		if e.Kind != c.kind || e.Status != c.status || e.Detail == "" {
			t.Errorf("%d %s: %#v", c.status, c.body, e)
		}
		for _, f := range []string{e.Detail, e.Message, e.Error(), e.Type, e.Code} {
			if strings.Contains(f, testKey) {
				t.Errorf("%d: the key is quoted: %q", c.status, f)
			}
		}
	}
}

// TestTransport: a refused connection is KindConnection, a canceled
// context KindCanceled, a deadline KindTimeout.
func TestTransport(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	for _, api := range apis {
		if e := suite.CompleteErr(t, newProvider(t, url, api), context.Background(), hello(), testKey); e.Kind != llm.KindConnection {
			t.Errorf("%s refused: %#v", api, e)
		}
	}
	block := make(chan struct{})
	s := suite.NewServer(t, func(w http.ResponseWriter, r *http.Request) {
		suite.Hold(r, block)
	})
	defer close(block)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if e := suite.CompleteErr(t, newProvider(t, s.URL, APIChat), ctx, hello(), testKey); e.Kind != llm.KindCanceled {
		t.Errorf("canceled: %#v", e)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if e := suite.CompleteErr(t, newProvider(t, s.URL, APIResponses), ctx, hello(), testKey); e.Kind != llm.KindTimeout {
		t.Errorf("deadline: %#v", e)
	}
}

// TestPanic: a panic in a middleware (or anywhere in the SDK) comes back
// as an *llm.Error, the key redacted, from Complete and Stream alike.
func TestPanic(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, chatOK, "Content-Type", "application/json"))
	boom := option.WithMiddleware(func(*http.Request, option.MiddlewareNext) (*http.Response, error) {
		panic("middleware exploded holding " + testKey)
	})
	for _, api := range apis {
		p := newProvider(t, s.URL, api, boom)
		e := suite.CompleteErr(t, p, context.Background(), hello(), testKey)
		if e.Kind != llm.KindUnknown || !strings.Contains(e.Message, "panicked") || strings.Contains(e.Message, testKey) {
			t.Errorf("%s: %#v", api, e)
		}
		st, err := p.Stream(context.Background(), hello())
		if st != nil || err == nil || strings.Contains(err.Error(), testKey) || llm.KindOf(err) != llm.KindUnknown {
			t.Errorf("%s Stream: %v %v", api, st, err)
		}
	}
	if s.Count.Load() != 0 {
		t.Errorf("%d requests sent", s.Count.Load())
	}
}

// tlsServer is a loopback HTTPS server recording its requests, for the
// Azure client (which sends its key over HTTPS only).
func tlsServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *suite.Request) {
	var last suite.Request
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		last = suite.Request{Method: r.Method, Path: r.URL.RequestURI(), Header: r.Header.Clone(), Body: b}
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s, &last
}

// TestAzure: a client built with the azure package's options calls the
// deployment named by the model, with the api-version and the api-key
// header, and the provider is named and deployed as Azure.
func TestAzure(t *testing.T) {
	const azureKey = "azure-key-0123456789abcdef"
	s, last := tlsServer(t, suite.Respond(200, chatOK, "Content-Type", "application/json", "Apim-Request-Id", "apim-1"))
	client := openai.NewClient(azure.WithEndpoint(s.URL, "2024-10-21"), azure.WithAPIKey(azureKey),
		option.WithHTTPClient(s.Client()), option.WithMaxRetries(5))
	p, err := New(client, Config{Platform: PlatformAzure, Region: "westeurope", APIKey: azureKey})
	if err != nil {
		t.Fatal(err)
	}
	if p.Name() != "azure.ai.openai" || p.Deployment() != (llm.Deployment{Platform: "azure", Region: "westeurope"}) {
		t.Errorf("name %q deployment %+v", p.Name(), p.Deployment())
	}
	req := hello()
	req.Model = "my-gpt4o"
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if last.Path != "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21" ||
		last.Header.Get("Api-Key") != azureKey || last.Header.Get("Authorization") != "" {
		t.Errorf("sent %s with api-key %q, authorization %q", last.Path, last.Header.Get("Api-Key"), last.Header.Get("Authorization"))
	}
	if res.Text != "Hello!" || res.RequestID != "apim-1" {
		t.Errorf("answer %+v", res)
	}
}

// TestNew: the names and deployments of each platform; bad options.
func TestNew(t *testing.T) {
	c := openai.NewClient(option.WithAPIKey("k"))
	for _, tc := range []struct {
		opts Config
		name string
	}{
		{Config{}, "openai"},
		{Config{Platform: "azure"}, "azure.ai.openai"},
		{Config{Platform: "vllm"}, "vllm"},
		{Config{Platform: "groq", Name: "groq-eu"}, "groq-eu"},
	} {
		p, err := New(c, tc.opts)
		if err != nil || p.Name() != tc.name {
			t.Errorf("%+v: %v %v", tc.opts, p, err)
		}
	}
	for _, o := range []Config{{API: "completions"}, {Platform: " openai"}, {APIKey: "key\n"}, {MaxResponseBytes: -1}} {
		_, err := New(c, o)
		if err == nil || !errors.Is(err, llm.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "openaisdk: invalid configuration: Config.") {
			t.Errorf("%+v: %v, want an error matching llm.ErrInvalidConfig naming the field", o, err)
		}
		if verr := o.Validate(); verr == nil || verr.Error() != err.Error() {
			t.Errorf("%+v: Validate says %v, New %v", o, verr, err)
		}
	}
	p, _ := New(c, Config{})
	if p.Capabilities() != llm.CapAll&^llm.CapDocumentURLs || p.Deployment().Platform != "openai" {
		t.Errorf("caps %v deployment %+v", p.Capabilities(), p.Deployment())
	}
}

func TestCheckResponseSchema(t *testing.T) {
	p, _ := New(openai.NewClient(option.WithAPIKey("k")), Config{})
	ok := `{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/x"}},"b":{"anyOf":[{"type":"string"},{"type":"null"}]}},
		"required":["a","b"],"additionalProperties":false,
		"$defs":{"x":{"type":"object","properties":{"y":{"type":"integer"}},"required":["y"],"additionalProperties":false}}}`
	if err := p.CheckResponseSchema([]byte(ok)); err != nil {
		t.Errorf("valid schema refused: %v", err)
	}
	for schema, pointer := range map[string]string{
		`[1]`:                               "not a JSON object",
		`{"type":"string"}`:                 "root is not an object",
		`{"anyOf":[{"type":"object"}]}`:     "root is anyOf",
		`{"type":"object","properties":{}}`: "the root: an object schema without",
		`{"type":"object","properties":{"a":{}},"required":[],"additionalProperties":false}`:                                                                                               `the root: property "a"`,
		`{"type":"object","properties":{"a":{"type":"object","properties":{}}},"required":["a"],"additionalProperties":false}`:                                                             "/properties/a: an object schema",
		`{"type":"object","properties":{"a":{"oneOf":[]}},"required":["a"],"additionalProperties":false}`:                                                                                  `/properties/a: "oneOf"`,
		`{"type":"object","properties":{},"additionalProperties":false,"$defs":{"d/e":{"type":"object"}}}`:                                                                                 "/$defs/d~1e:",
		`{"type":"object","properties":{"l":{"type":"array","items":{"type":"object","properties":{"z":{}},"additionalProperties":false}}},"required":["l"],"additionalProperties":false}`: `/properties/l/items: property "z"`,
	} {
		err := p.CheckResponseSchema([]byte(schema))
		if err == nil || !strings.Contains(err.Error(), pointer) || !strings.HasPrefix(err.Error(), "openai: ") {
			t.Errorf("%s: %v; want an error naming %q", schema, err, pointer)
		}
	}
}

// TestResponsesBody: the parts of a user message as Responses API input
// content, a document by URL included; Params.Stop cannot be sent.
func TestResponsesBody(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, responsesOK, "Content-Type", "application/json"))
	p := newProvider(t, s.URL, APIResponses)
	if p.Capabilities() != llm.CapAll {
		t.Errorf("capabilities %v", p.Capabilities())
	}
	req := hello()
	req.Params = llm.Params{Temperature: llm.Float(0.2), Extra: map[string]any{"store": false}}
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: "Send it."},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ImagePart("image/png", []byte{1, 2}), llm.ImageURLPart("https://example.com/a.png"),
			llm.DocumentPart("application/pdf", []byte("%PDF")), llm.DocumentURLPart("https://example.com/a.pdf"),
			llm.DocumentPart("text/plain", []byte("notes"))}})
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, s.Last().Body, `{"model":"gpt-4o","temperature":0.2,"store":false,"input":[
		{"role":"user","content":"Hi"},
		{"role":"assistant","content":"Send it."},
		{"role":"user","content":[
			{"type":"input_image","image_url":"data:image/png;base64,AQI=","detail":"auto"},
			{"type":"input_image","image_url":"https://example.com/a.png","detail":"auto"},
			{"type":"input_file","file_data":"data:application/pdf;base64,JVBERg==","filename":"document-1.pdf"},
			{"type":"input_file","file_url":"https://example.com/a.pdf"},
			{"type":"input_text","text":"notes"}]}]}`)
	n := s.Count.Load()
	req.Params.Stop = []string{"END"}
	if e := suite.CompleteErr(t, p, context.Background(), req, testKey); e.Kind != llm.KindBadRequest || s.Count.Load() != n {
		t.Errorf("stop: %#v", e)
	}
	req.Params.Stop = nil
	req.Params.Extra = map[string]any{"bad": make(chan int)}
	if e := suite.CompleteErr(t, p, context.Background(), req, testKey); e.Kind != llm.KindBadRequest || s.Count.Load() != n {
		t.Errorf("unencodable extra: %#v", e)
	}
}

// TestOddClients: a zero openai.Client (which the SDK cannot use) fails
// with an *llm.Error, not a panic; a 200 that is not JSON is KindServer.
func TestOddClients(t *testing.T) {
	for _, api := range apis {
		p, err := New(openai.Client{}, Config{API: api})
		if err != nil {
			t.Fatal(err)
		}
		suite.CompleteErr(t, p, context.Background(), hello(), testKey)
		if st, err := p.Stream(context.Background(), hello()); st != nil || err == nil {
			t.Errorf("%s: zero client streamed", api)
		}
	}
	s := suite.NewServer(t, suite.Respond(200, "hello", "Content-Type", "text/plain", "X-Request-Id", "req_t"))
	e := suite.CompleteErr(t, newProvider(t, s.URL, APIChat), context.Background(), hello(), testKey)
	if e.Kind != llm.KindServer || e.Status != 200 || e.RequestID != "req_t" || e.Message == "" {
		t.Errorf("text/plain 200: %#v", e)
	}
}
