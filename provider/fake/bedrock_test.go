package fake_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/provider/fake"
)

const bedrockModel = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

// sigV4 is an Authorization header of SigV4 shape for region, as the AWS
// signer writes it (the fake does not check the signature itself).
func sigV4(region string) string {
	return "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/" + region +
		"/bedrock/aws4_request, SignedHeaders=content-type;host;x-amz-date, Signature=" + strings.Repeat("0a", 32)
}

const amzDate = "20261201T233500Z"

func bedrockBody() string {
	return `{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`
}

func bedrockURL(base, model string, stream bool) string {
	m := "invoke"
	if stream {
		m = "invoke-with-response-stream"
	}
	return base + "/model/" + url.PathEscape(model) + "/" + m
}

func bedrockPost(t *testing.T, c *http.Client, base, model string, stream bool, body string) result {
	t.Helper()
	return post(t, c, bedrockURL(base, model, stream), body, "Authorization", sigV4("us-east-1"), "X-Amz-Date", amzDate)
}

func TestBedrockInvoke(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script(bedrockModel, fake.Answer("Hello from Bedrock.").Usage(7, 4))
		r := bedrockPost(t, c, base, bedrockModel, false, bedrockBody())
		if r.status != 200 || r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Amzn-Requestid") != "req_fake_1" {
			t.Fatalf("status %d headers %v body %s", r.status, r.header, r.body)
		}
		var m struct {
			Type       string `json:"type"`
			Model      string `json:"model"`
			StopReason string `json:"stop_reason"`
			Content    []struct{ Text string }
			Usage      struct {
				InputTokens  int `json:"input_tokens"`
				OutputTokens int `json:"output_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(r.body), &m); err != nil {
			t.Fatal(err)
		}
		if m.Type != "message" || m.Model != bedrockModel || m.StopReason != "end_turn" || m.Content[0].Text != "Hello from Bedrock." ||
			m.Usage.InputTokens != 7 || m.Usage.OutputTokens != 4 {
			t.Errorf("message %+v", m)
		}
		if r.header.Get("Anthropic-Ratelimit-Requests-Limit") != "" {
			t.Error("Bedrock answers carry no Anthropic rate-limit headers")
		}
		calls := s.Calls(bedrockModel)
		if len(calls) != 1 || calls[0].Format != fake.Bedrock || calls[0].Model != bedrockModel ||
			calls[0].Header.Get("Authorization") != "AWS4-HMAC-SHA256 [redacted]" {
			t.Errorf("calls %+v", calls)
		}
	})
}

// An ARN with a slash, escaped in the path as the SDK sends it, is the
// model's key unescaped.
func TestBedrockARNModel(t *testing.T) {
	s := fake.New()
	arn := "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/xv9example4b"
	s.Script(arn, fake.Answer("arn"))
	r := bedrockPost(t, s.Client(), s.URL(), arn, false, bedrockBody())
	if r.status != 200 || !strings.Contains(r.body, `"text":"arn"`) || s.Requests(arn) != 1 {
		t.Fatalf("%d %s", r.status, r.body)
	}
}

func TestBedrockVersionAndBody(t *testing.T) {
	s := fake.New()
	c := s.Client()
	for _, tc := range []struct {
		body, want string
		status     int
	}{
		{bedrockBody(), "", 200},
		{`{"anthropic_version":"2026-10-21","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "", 200}, // what anthropic-sdk-go v2.15.0 sends
		{`{"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "required key [anthropic_version] not found", 400},
		{`{"anthropic_version":"bedrock-2099-01-01","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "Invalid API version", 400},
		{`{"anthropic_version":"bedrock-2023-05-31","model":"x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "extraneous key [model]", 400},
		{`{"anthropic_version":"bedrock-2023-05-31","stream":true,"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "extraneous key [stream]", 400},
		{`{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,"messages":[]}`, "at least one message", 400},
		{`{"anthropic_version":"bedrock-2023-05-31","anthropic_beta":["x"],"max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, "", 200},
		{`not json`, "Malformed input request", 400},
	} {
		r := bedrockPost(t, c, s.URL(), bedrockModel, false, tc.body)
		if r.status != tc.status || !strings.Contains(r.body, tc.want) {
			t.Errorf("%s: %d %s", tc.body, r.status, r.body)
		}
		if tc.status == 400 && (r.header.Get("X-Amzn-Errortype") != "ValidationException" || !strings.HasPrefix(r.body, `{"message":`)) {
			t.Errorf("%s: headers %v body %s", tc.body, r.header, r.body)
		}
	}
}

func TestBedrockAuth(t *testing.T) {
	s := fake.New()
	s.Region("eu-west-1")
	c := s.Client()
	u := bedrockURL(s.URL(), bedrockModel, false)
	good := sigV4("eu-west-1")
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
		typ     string
	}{
		{"sigv4", []string{"Authorization", good, "X-Amz-Date", amzDate}, 200, ""},
		{"bearer API key", []string{"Authorization", "Bearer ABSKexample"}, 200, ""},
		{"none", nil, 403, "MissingAuthenticationTokenException"},
		{"malformed", []string{"Authorization", "AWS4-HMAC-SHA256 Credential=AKID", "X-Amz-Date", amzDate}, 403, "IncompleteSignatureException"},
		{"wrong region", []string{"Authorization", sigV4("us-east-1"), "X-Amz-Date", amzDate}, 403, "InvalidSignatureException"},
		{"wrong service", []string{"Authorization", strings.Replace(good, "/bedrock/", "/s3/", 1), "X-Amz-Date", amzDate}, 403, "InvalidSignatureException"},
		{"no host signed", []string{"Authorization", strings.Replace(good, "content-type;host;x-amz-date", "x-amz-date", 1), "X-Amz-Date", amzDate}, 403, "InvalidSignatureException"},
		{"no date", []string{"Authorization", good}, 403, "IncompleteSignatureException"},
		{"date mismatch", []string{"Authorization", good, "X-Amz-Date", "20261202T000000Z"}, 403, "InvalidSignatureException"},
	} {
		r := post(t, c, u, bedrockBody(), tc.headers...)
		if r.status != tc.status || r.header.Get("X-Amzn-Errortype") != tc.typ {
			t.Errorf("%s: %d %s %s", tc.name, r.status, r.header.Get("X-Amzn-Errortype"), r.body)
		}
	}
	if n := s.Requests(bedrockModel); n != 9 {
		t.Errorf("recorded %d requests, want 9 (rejected ones too)", n)
	}
}

func TestBedrockErrors(t *testing.T) {
	s := fake.New()
	c := s.Client()
	for _, tc := range []struct {
		o      fake.Outcome
		status int
		typ    string
		msg    string
	}{
		{fake.RateLimited("3"), 429, "ThrottlingException", "Too many requests"},
		{fake.Overloaded(), 503, "ServiceUnavailableException", "unable to process"},
		{fake.ServerError(), 500, "InternalServerException", "unexpected error"},
		{fake.BadRequest("bad thing"), 400, "ValidationException", "bad thing"},
		{fake.Status(403), 403, "AccessDeniedException", "don't have access"},
		{fake.Status(408), 408, "ModelTimeoutException", "timed out"},
		{fake.ContextTooLong(), 400, "ValidationException", "Input is too long"},
		{fake.SpendCap(), 400, "ServiceQuotaExceededException", "service quota"},
		{fake.Status(424).Type("ModelErrorException").Message("boom"), 424, "ModelErrorException", "boom"},
	} {
		s.Script(bedrockModel, tc.o)
		r := bedrockPost(t, c, s.URL(), bedrockModel, false, bedrockBody())
		var body struct{ Message string }
		if r.status != tc.status || r.header.Get("X-Amzn-Errortype") != tc.typ || json.Unmarshal([]byte(r.body), &body) != nil ||
			!strings.Contains(body.Message, tc.msg) || r.header.Get("X-Amzn-Requestid") == "" {
			t.Errorf("%s: %d %v %s", tc.typ, r.status, r.header, r.body)
		}
		if tc.status == 429 && r.header.Get("Retry-After") != "3" {
			t.Errorf("retry-after %q", r.header.Get("Retry-After"))
		}
	}
}

// bedrockEvents decodes a Bedrock stream into its Anthropic events (type
// and JSON) and exceptions ("exception:<type>" and the payload).
func bedrockEvents(t *testing.T, b []byte) (types []string, data []string) {
	t.Helper()
	for _, f := range decodeEventStream(t, b) {
		switch f.headers[":message-type"] {
		case "event":
			if f.headers[":event-type"] != "chunk" || f.headers[":content-type"] != "application/json" {
				t.Fatalf("headers %v", f.headers)
			}
			var p struct{ Bytes string }
			if err := json.Unmarshal(f.payload, &p); err != nil {
				t.Fatal(err)
			}
			ev, err := base64.StdEncoding.DecodeString(p.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			var typ struct{ Type string }
			if err := json.Unmarshal(ev, &typ); err != nil {
				t.Fatal(err)
			}
			types, data = append(types, typ.Type), append(data, string(ev))
		case "exception":
			types, data = append(types, "exception:"+f.headers[":exception-type"]), append(data, string(f.payload))
		default:
			t.Fatalf("headers %v", f.headers)
		}
	}
	return types, data
}

func bedrockStreamReq(t *testing.T, base string) *http.Request {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, bedrockURL(base, bedrockModel, true), strings.NewReader(bedrockBody()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", sigV4("us-east-1"))
	req.Header.Set("X-Amz-Date", amzDate)
	return req
}

func TestBedrockStream(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script(bedrockModel, fake.Answer("Hello there").ToolCalls(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}))
		resp, b, err := readStream(t, c, bedrockStreamReq(t, base))
		if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
			t.Fatalf("%v %d %v", err, resp.StatusCode, resp.Header)
		}
		types, data := bedrockEvents(t, b)
		want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop " +
			"content_block_start content_block_delta content_block_delta content_block_delta content_block_delta content_block_stop message_delta message_stop"
		if strings.Join(types, " ") != want {
			t.Fatalf("events %v", types)
		}
		if !strings.Contains(data[3], `"text":"Hello"`) || !strings.Contains(data[6], `"name":"get_weather"`) ||
			!strings.Contains(data[12], `"stop_reason":"tool_use"`) {
			t.Errorf("data %v", data)
		}
		if calls := s.Calls(bedrockModel); len(calls) != 1 || calls[0].Format != fake.Bedrock {
			t.Errorf("calls %+v", calls)
		}
	})
}

func TestBedrockStreamFaults(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script(bedrockModel,
			fake.Answer("Hello there").ErrorAfter(1),
			fake.Answer("Hello there").ErrorAfter(1).Type("throttlingException").Message("slow down"),
			fake.Answer("Hello there").CutAfter(1),
			fake.RateLimited("1"))
		_, b, err := readStream(t, c, bedrockStreamReq(t, base))
		types, data := bedrockEvents(t, b)
		if err != nil || types[len(types)-1] != "exception:internalServerException" || !strings.Contains(data[len(data)-1], `"message":`) {
			t.Errorf("ErrorAfter: %v %v %v", err, types, data)
		}
		_, b, _ = readStream(t, c, bedrockStreamReq(t, base))
		types, data = bedrockEvents(t, b)
		if types[len(types)-1] != "exception:throttlingException" || data[len(data)-1] != `{"message":"slow down"}` {
			t.Errorf("ErrorAfter typed: %v %v", types, data)
		}
		_, _, err = readStream(t, c, bedrockStreamReq(t, base))
		if err == nil || !strings.Contains(err.Error(), io.ErrUnexpectedEOF.Error()) {
			t.Errorf("CutAfter: %v", err)
		}
		resp, b, _ := readStream(t, c, bedrockStreamReq(t, base))
		if resp.StatusCode != 429 || resp.Header.Get("X-Amzn-Errortype") != "ThrottlingException" || !strings.HasPrefix(string(b), `{"message"`) {
			t.Errorf("RateLimited: %d %v %s", resp.StatusCode, resp.Header, b)
		}
	})
}
