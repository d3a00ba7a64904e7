package fake_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/provider/fake"
)

// aBody is an Anthropic body for model m with messages msgs (JSON) and
// extra top-level fields (JSON object members, or "").
func aBody(msgs, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"model":"m","max_tokens":64,"messages":` + msgs + extra + `}`
}

func oBody(msgs, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"model":"m","messages":` + msgs + extra + `}`
}

const (
	// toolTurns is a tool round trip in Anthropic messages.
	aToolUse = `{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]}`
	oToolUse = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}`
)

type errorBodyFields struct {
	Error struct {
		Type    string
		Message string
		Param   *string
		Code    *string
	}
}

// sendShape posts body in format f to s after editing the default headers:
// each header is set to its value, or deleted when the value is "".
func sendShape(t *testing.T, s *fake.Server, f fake.Format, header map[string]string, body string) result {
	t.Helper()
	req := newRequest(t, context.Background(), s.URL(), f, body)
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	return do(t, s.Client(), req)
}

// TestRejectedShapes sends, one by one, request shapes the real APIs answer
// with a 400 (or 401) and checks the fake's status, type and message.
func TestRejectedShapes(t *testing.T) {
	A, O := fake.Anthropic, fake.OpenAI
	user := `[{"role":"user","content":"hi"}]`
	tests := []struct {
		name   string
		format fake.Format
		header map[string]string // "" value deletes
		body   string
		status int
		msg    string // the whole message, or a prefix ending in "…"
		param  string // OpenAI error.param, when set
		code   string // OpenAI error.code, when set
	}{
		// Anthropic: headers.
		{name: "anthropic no key at all", format: A, header: map[string]string{"X-Api-Key": ""}, body: aBody(user, ""), status: 401, msg: "x-api-key header is required"},
		{name: "anthropic unknown version", format: A, header: map[string]string{"Anthropic-Version": "2024-13-01"}, body: aBody(user, ""), status: 400, msg: `anthropic-version: invalid version "2024-13-01"…`},
		// Anthropic: max_tokens.
		{name: "anthropic max_tokens missing", format: A, body: `{"model":"m","messages":` + user + `}`, status: 400, msg: "max_tokens: Field required"},
		{name: "anthropic max_tokens negative", format: A, body: `{"model":"m","max_tokens":-1,"messages":` + user + `}`, status: 400, msg: "max_tokens: Input should be greater than or equal to 0"},
		{name: "anthropic max_tokens not an integer", format: A, body: `{"model":"m","max_tokens":1.5,"messages":` + user + `}`, status: 400, msg: "max_tokens: Input should be a valid integer"},
		{name: "anthropic max_tokens above default limit", format: A, body: `{"model":"m","max_tokens":64001,"messages":` + user + `}`, status: 400, msg: "max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for m"},
		{name: "anthropic max_tokens above opus limit", format: A, body: `{"model":"claude-opus-5","max_tokens":128001,"messages":` + user + `}`, status: 400, msg: "max_tokens: 128001 > 128000, which is the maximum allowed number of output tokens for claude-opus-5"},
		{name: "anthropic max_tokens above claude-3-5 limit", format: A, body: `{"model":"claude-3-5-haiku-20241022","max_tokens":8193,"messages":` + user + `}`, status: 400, msg: "max_tokens: 8193 > 8192…"},
		// Anthropic: content.
		{name: "anthropic content empty string", format: A, body: aBody(`[{"role":"user","content":""}]`, ""), status: 400, msg: "messages.0: all messages must have non-empty content except for the optional final assistant message"},
		{name: "anthropic content empty list", format: A, body: aBody(`[{"role":"user","content":[]}]`, ""), status: 400, msg: "messages.0: all messages must have non-empty content except for the optional final assistant message"},
		{name: "anthropic content a number", format: A, body: aBody(`[{"role":"user","content":42}]`, ""), status: 400, msg: "messages.0.content: Input should be a valid list"},
		{name: "anthropic content an object", format: A, body: aBody(`[{"role":"user","content":{"type":"text","text":"hi"}}]`, ""), status: 400, msg: "messages.0.content: Input should be a valid list"},
		{name: "anthropic empty text block", format: A, body: aBody(`[{"role":"user","content":[{"type":"text","text":""}]}]`, ""), status: 400, msg: "messages: text content blocks must be non-empty"},
		{name: "anthropic unknown block type", format: A, body: aBody(`[{"role":"user","content":[{"type":"video","url":"x"}]}]`, ""), status: 400, msg: "messages.0.content.0: Input tag 'video' found using 'type' does not match any of the expected tags: …"},
		{name: "anthropic image without source", format: A, body: aBody(`[{"role":"user","content":[{"type":"image"}]}]`, ""), status: 400, msg: "messages.0.content.0.source: Field required"},
		{name: "anthropic image of a type it does not take", format: A, body: aBody(`[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"Qk0="}}]}]`, ""), status: 400, msg: "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"},
		{name: "anthropic zip document", format: A, body: aBody(`[{"role":"user","content":[{"type":"document","source":{"type":"base64","media_type":"application/zip","data":"UEsDBA=="}}]}]`, ""), status: 400, msg: "messages.0.content.0.document.source.base64.media_type: Input should be 'application/pdf'"},
		{name: "anthropic text document not text/plain", format: A, body: aBody(`[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/markdown","data":"# a"}}]}]`, ""), status: 400, msg: "messages.0.content.0.document.source.text.media_type: Input should be 'text/plain'"},
		{name: "anthropic tool_use without input", format: A, body: aBody(`[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f"}]}]`, ""), status: 400, msg: "messages.1.content.0.input: Input should be a valid dictionary"},
		{name: "anthropic final assistant trailing space", format: A, body: aBody(`[{"role":"user","content":"hi"},{"role":"assistant","content":"The answer is "}]`, ""), status: 400, msg: "messages: final assistant content cannot end with trailing whitespace"},
		{name: "anthropic final assistant block trailing newline", format: A, body: aBody(`[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"So\n"}]}]`, ""), status: 400, msg: "messages: final assistant content cannot end with trailing whitespace"},
		// Anthropic: sampling.
		{name: "anthropic temperature above 1", format: A, body: aBody(user, `"temperature":1.5`), status: 400, msg: "temperature: Input should be less than or equal to 1"},
		{name: "anthropic temperature below 0", format: A, body: aBody(user, `"temperature":-0.1`), status: 400, msg: "temperature: Input should be greater than or equal to 0"},
		{name: "anthropic top_p above 1", format: A, body: aBody(user, `"top_p":1.01`), status: 400, msg: "top_p: Input should be less than or equal to 1"},
		{name: "anthropic top_p a string", format: A, body: aBody(user, `"top_p":"high"`), status: 400, msg: "top_p: Input should be a valid number"},
		// Anthropic: fields and system.
		{name: "anthropic unknown field", format: A, body: aBody(user, `"frequency_penalty":0.5`), status: 400, msg: "frequency_penalty: Extra inputs are not permitted"},
		{name: "anthropic openai-style n", format: A, body: aBody(user, `"n":2`), status: 400, msg: "n: Extra inputs are not permitted"},
		{name: "anthropic system a number", format: A, body: aBody(user, `"system":7`), status: 400, msg: "system: Input should be a valid list"},
		{name: "anthropic system an image block", format: A, body: aBody(user, `"system":[{"type":"image","source":{"type":"url","url":"x"}}]`), status: 400, msg: "system.0.type: Input should be 'text'"},
		// Anthropic: tools.
		{name: "anthropic tool_result without tool_use", format: A, body: aBody(`[{"role":"user","content":"hi"},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"sunny"}]}]`, ""), status: 400, msg: "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_9. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."},
		{name: "anthropic tool_result for another id", format: A, body: aBody(`[{"role":"user","content":"hi"},`+aToolUse+`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"sunny"}]}]`, ""), status: 400, msg: "messages.2.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2…"},
		{name: "anthropic tool_use without tool_result", format: A, body: aBody(`[{"role":"user","content":"hi"},`+aToolUse+`,{"role":"user","content":"and?"}]`, ""), status: 400, msg: "messages.2: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1. Each `tool_use` block must have a corresponding `tool_result` block in the next message."},
		{name: "anthropic tool without input_schema", format: A, body: aBody(user, `"tools":[{"name":"get_weather"}]`), status: 400, msg: "tools.0.custom.input_schema: Field required"},
		{name: "anthropic tool without name", format: A, body: aBody(user, `"tools":[{"input_schema":{"type":"object"}}]`), status: 400, msg: "tools.0.name: Field required"},
		{name: "anthropic tool_choice unknown type", format: A, body: aBody(user, `"tool_choice":{"type":"required"}`), status: 400, msg: "tool_choice: Input tag 'required' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'"},
		{name: "anthropic tool_choice tool without name", format: A, body: aBody(user, `"tool_choice":{"type":"tool"}`), status: 400, msg: "tool_choice.tool.name: Field required"},

		// OpenAI: messages.
		{name: "openai user without content", format: O, body: oBody(`[{"role":"user"}]`, ""), status: 400, msg: "Missing required parameter: 'messages[0].content'.", param: "messages[0].content", code: "missing_required_parameter"},
		{name: "openai user null content", format: O, body: oBody(`[{"role":"user","content":null}]`, ""), status: 400, msg: "Missing required parameter: 'messages[0].content'.", param: "messages[0].content", code: "missing_required_parameter"},
		{name: "openai content a number", format: O, body: oBody(`[{"role":"user","content":3}]`, ""), status: 400, msg: "Invalid type for 'messages[0].content': expected one of a string or array of objects, but got an integer instead.", param: "messages[0].content", code: "invalid_type"},
		{name: "openai content an object", format: O, body: oBody(`[{"role":"user","content":{"text":"hi"}}]`, ""), status: 400, msg: "Invalid type for 'messages[0].content': expected one of a string or array of objects, but got an object instead.", param: "messages[0].content", code: "invalid_type"},
		{name: "openai unknown part type", format: O, body: oBody(`[{"role":"user","content":[{"type":"video","video":"x"}]}]`, ""), status: 400, msg: "Invalid value: 'video'. Supported values are: 'text', 'image_url', 'input_audio', 'file'.", param: "messages[0].content[0].type", code: "invalid_value"},
		{name: "openai file not a PDF", format: O, body: oBody(`[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"file","file":{"filename":"a.zip","file_data":"data:application/zip;base64,UEsDBA=="}}]}]`, ""), status: 400, msg: "Invalid file data: 'messages[0].content[1].file.file_data'. Expected a base64-encoded data URL with an application/pdf MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got unsupported MIME type 'application/zip'.", param: "messages[0].content[1].file.file_data", code: "invalid_value"},
		{name: "openai tool without tool_call_id", format: O, body: oBody(`[{"role":"user","content":"hi"},`+oToolUse+`,{"role":"tool","content":"sunny"}]`, ""), status: 400, msg: "Missing required parameter: 'messages[2].tool_call_id'.", param: "messages[2].tool_call_id", code: "missing_required_parameter"},
		{name: "openai tool answering nothing", format: O, body: oBody(`[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`, ""), status: 400, msg: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", param: "messages.[1].role"},
		{name: "openai tool answering another id", format: O, body: oBody(`[{"role":"user","content":"hi"},`+oToolUse+`,{"role":"tool","tool_call_id":"call_2","content":"sunny"}]`, ""), status: 400, msg: "Invalid parameter: 'tool_call_id' of 'call_2' not found in 'tool_calls' of previous message.", param: "messages.[2].tool_call_id"},
		{name: "openai tool_calls unanswered", format: O, body: oBody(`[{"role":"user","content":"hi"},`+oToolUse+`,{"role":"user","content":"and?"}]`, ""), status: 400, msg: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_1", param: "messages.[1].role"},
		{name: "openai tool_call without function name", format: O, body: oBody(`[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"x"}]`, ""), status: 400, msg: "Missing required parameter: 'messages[1].tool_calls[0].function.name'.", code: "missing_required_parameter"},
		// OpenAI: parameters.
		{name: "openai temperature above 2", format: O, body: oBody(user, `"temperature":2.5`), status: 400, msg: "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 2.5 instead.", param: "temperature", code: "decimal_above_max_value"},
		{name: "openai temperature below 0", format: O, body: oBody(user, `"temperature":-1`), status: 400, msg: "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead.", param: "temperature", code: "decimal_below_min_value"},
		{name: "openai max_completion_tokens -1", format: O, body: oBody(user, `"max_completion_tokens":-1`), status: 400, msg: "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, but got -1 instead.", param: "max_completion_tokens", code: "integer_below_min_value"},
		{name: "openai max_completion_tokens 0", format: O, body: oBody(user, `"max_completion_tokens":0`), status: 400, msg: "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, but got 0 instead.", param: "max_completion_tokens", code: "integer_below_min_value"},
		{name: "openai n 0", format: O, body: oBody(user, `"n":0`), status: 400, msg: "Invalid 'n': integer below minimum value. Expected a value >= 1, but got 0 instead.", param: "n", code: "integer_below_min_value"},
		{name: "openai n a string", format: O, body: oBody(user, `"n":"2"`), status: 400, msg: "Invalid type for 'n': expected an integer, but got a string instead.", param: "n", code: "invalid_type"},
		{name: "openai unknown field", format: O, body: oBody(user, `"max_tokens_to_sample":5`), status: 400, msg: "Unrecognized request argument supplied: max_tokens_to_sample"},
		{name: "openai anthropic-style system", format: O, body: oBody(user, `"system":"be nice"`), status: 400, msg: "Unrecognized request argument supplied: system"},
		// OpenAI: tools and response_format.
		{name: "openai tool without function", format: O, body: oBody(user, `"tools":[{"type":"function"}]`), status: 400, msg: "Missing required parameter: 'tools[0].function'.", param: "tools[0].function", code: "missing_required_parameter"},
		{name: "openai tool_choice without tools", format: O, body: oBody(user, `"tool_choice":"auto"`), status: 400, msg: "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", param: "tool_choice"},
		{name: "openai tool_choice bad string", format: O, body: oBody(user, `"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"any"`), status: 400, msg: "Invalid value: 'any'. Supported values are: 'none', 'auto', and 'required'.", param: "tool_choice", code: "invalid_value"},
		{name: "openai response_format json_schema without schema", format: O, body: oBody(user, `"response_format":{"type":"json_schema"}`), status: 400, msg: "Missing required parameter: 'response_format.json_schema'.", param: "response_format.json_schema", code: "missing_required_parameter"},
		{name: "openai response_format unknown type", format: O, body: oBody(user, `"response_format":{"type":"yaml"}`), status: 400, msg: "Invalid value: 'yaml'. Supported values are: 'text', 'json_object', and 'json_schema'.", param: "response_format.type", code: "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fake.New()
			r := sendShape(t, s, tt.format, tt.header, tt.body)
			var e errorBodyFields
			if err := json.Unmarshal([]byte(r.body), &e); err != nil {
				t.Fatalf("body %s: %v", r.body, err)
			}
			wantType := "invalid_request_error"
			if tt.status == 401 && tt.format == fake.Anthropic {
				wantType = "authentication_error"
			}
			okMsg := e.Error.Message == tt.msg
			if p, ok := strings.CutSuffix(tt.msg, "…"); ok {
				okMsg = strings.HasPrefix(e.Error.Message, p)
			}
			if r.status != tt.status || e.Error.Type != wantType || !okMsg {
				t.Errorf("got %d %s\nwant %d %s %q", r.status, r.body, tt.status, wantType, tt.msg)
			}
			if tt.param != "" && (e.Error.Param == nil || *e.Error.Param != tt.param) {
				t.Errorf("param = %v, want %q", e.Error.Param, tt.param)
			}
			if tt.code != "" && (e.Error.Code == nil || *e.Error.Code != tt.code) {
				t.Errorf("code = %v, want %q", e.Error.Code, tt.code)
			}
			if len(s.Calls("m"))+len(s.Calls("claude-opus-5"))+len(s.Calls("claude-3-5-haiku-20241022")) != 1 {
				t.Error("the rejected request was not recorded")
			}
		})
	}
}

// TestAcceptedShapes sends shapes the real APIs accept, including the ones
// next to a rejected shape, and expects the default answer.
func TestAcceptedShapes(t *testing.T) {
	A, O := fake.Anthropic, fake.OpenAI
	user := `[{"role":"user","content":"hi"}]`
	img := `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}`
	doc := `{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}`
	pdf := `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERg=="}}`
	txt := `{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes"}}`
	gif := `{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lGOA=="}}`
	tests := []struct {
		name   string
		format fake.Format
		header map[string]string
		body   string
	}{
		{"anthropic bearer auth", A, map[string]string{"X-Api-Key": "", "Authorization": "Bearer " + testKey}, aBody(user, "")},
		{"anthropic version 2023-01-01", A, map[string]string{"Anthropic-Version": "2023-01-01"}, aBody(user, "")},
		{"anthropic version 2026-10-21", A, map[string]string{"Anthropic-Version": "2026-10-21"}, aBody(user, "")},
		{"anthropic max_tokens 0 (cache pre-warming)", A, nil, `{"model":"m","max_tokens":0,"messages":` + user + `}`},
		{"anthropic max_tokens at default limit", A, nil, `{"model":"m","max_tokens":64000,"messages":` + user + `}`},
		{"anthropic max_tokens at opus limit", A, nil, `{"model":"claude-opus-5","max_tokens":128000,"messages":` + user + `}`},
		{"anthropic blocks", A, nil, aBody(`[{"role":"user","content":[{"type":"text","text":"what is this?"},`+img+`,`+doc+`]}]`, "")},
		{"anthropic media types it takes", A, nil, aBody(`[{"role":"user","content":[{"type":"text","text":"what is this?"},`+gif+`,`+pdf+`,`+txt+`]}]`, "")},
		{"anthropic consecutive user turns", A, nil, aBody(`[{"role":"user","content":"hi"},{"role":"user","content":"again"}]`, "")},
		{"anthropic first turn assistant", A, nil, aBody(`[{"role":"assistant","content":"Hello."},{"role":"user","content":"hi"}]`, "")},
		{"anthropic prefill", A, nil, aBody(`[{"role":"user","content":"hi"},{"role":"assistant","content":"The answer is ("}]`, "")},
		{"anthropic empty final assistant", A, nil, aBody(`[{"role":"user","content":"hi"},{"role":"assistant","content":""}]`, "")},
		{"anthropic tool round trip", A, nil, aBody(`[{"role":"user","content":"weather?"},`+aToolUse+`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},{"type":"text","text":"thanks"}]}]`,
			`"tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},{"type":"web_search_20250305","name":"web_search"}],"tool_choice":{"type":"tool","name":"get_weather"}`)},
		{"anthropic tool_result split over merged user turns", A, nil, aBody(`[{"role":"user","content":"weather?"},`+aToolUse+`,{"role":"user","content":"first"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}]`, "")},
		{"anthropic final assistant tool_use", A, nil, aBody(`[{"role":"user","content":"weather?"},`+aToolUse+`]`, "")},
		{"anthropic every documented field", A, nil, aBody(`[{"role":"user","content":"hi"}]`,
			`"system":[{"type":"text","text":"be nice","cache_control":{"type":"ephemeral"}}],"metadata":{"user_id":"u"},"stop_sequences":["END"],"stream":false,`+
				`"temperature":1,"top_k":5,"top_p":0,"thinking":{"type":"adaptive"},"service_tier":"auto","output_config":{"format":{"type":"json_schema","schema":{"type":"object"}}},`+
				`"container":"c","mcp_servers":[],"context_management":{},"inference_geo":"us","speed":"standard","cache_control":{"type":"ephemeral"},"diagnostics":{}`)},
		{"anthropic system string", A, nil, aBody(user, `"system":"be nice"`)},

		{"openai parts", O, nil, oBody(`[{"role":"system","content":[{"type":"text","text":"be nice"}]},{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]`, "")},
		{"openai PDF file", O, nil, oBody(`[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERg=="}}]}]`, "")},
		{"openai tool round trip", O, nil, oBody(`[{"role":"user","content":"weather?"},`+oToolUse+`,{"role":"tool","tool_call_id":"call_1","content":"sunny"}]`,
			`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}},"parallel_tool_calls":false`)},
		{"openai response_format json_schema", O, nil, oBody(user, `"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"},"strict":true}}`)},
		{"openai every bound at its edge", O, nil, oBody(user, `"temperature":2,"top_p":1,"n":1,"max_completion_tokens":1,"max_tokens":1,"presence_penalty":-2,"frequency_penalty":2,"seed":1,"store":false,"user":"u","reasoning_effort":"low","stop":["x"]`)},
		{"openai assistant text then user", O, nil, oBody(`[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"again"}]`, "")},
		{"openai null optional fields", O, nil, oBody(user, `"temperature":null,"n":null,"tools":null`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := fake.New()
			r := sendShape(t, s, tt.format, tt.header, tt.body)
			if r.status != 200 || !strings.Contains(r.body, "fake answer from") {
				t.Errorf("got %d %s, want the default answer", r.status, r.body)
			}
		})
	}
}

// TestCallsRecordTools checks Call.Tools and Call.ToolResults.
func TestCallsRecordTools(t *testing.T) {
	s := fake.New()
	c := s.Client()
	body := aBody(`[{"role":"user","content":"weather?"},`+aToolUse+`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sun"},{"type":"text","text":"ny"}],"is_error":true}]}]`,
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}},{"name":"get_time","input_schema":{"type":"object"}}]`)
	do(t, c, newRequest(t, context.Background(), s.URL(), fake.Anthropic, body))
	body = oBody(`[{"role":"user","content":"weather?"},`+oToolUse+`,{"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"rainy"}]}]`,
		`"tools":[{"type":"function","function":{"name":"get_weather"}}]`)
	do(t, c, newRequest(t, context.Background(), s.URL(), fake.OpenAI, body))
	calls := s.Calls("m")
	if len(calls) != 2 {
		t.Fatalf("%d calls", len(calls))
	}
	if got := fmt.Sprint(calls[0].Tools, calls[0].ToolResults); got != "[get_weather get_time] [{toolu_1 sunny true}]" {
		t.Errorf("anthropic recorded %s", got)
	}
	if got := fmt.Sprint(calls[1].Tools, calls[1].ToolResults); got != "[get_weather] [{call_1 rainy false}]" {
		t.Errorf("openai recorded %s", got)
	}
	// Calls returns copies.
	calls[0].ToolResults[0].Content = "changed"
	calls[0].Tools[0] = "changed"
	if c := s.Calls("m")[0]; c.ToolResults[0].Content != "sunny" || c.Tools[0] != "get_weather" {
		t.Error("Calls shares its slices")
	}
	// A request without tools records none.
	call(t, s.Client(), s.URL(), fake.Anthropic, "plain")
	if c := s.Calls("plain")[0]; c.Tools != nil || c.ToolResults != nil {
		t.Errorf("plain request recorded %v %v", c.Tools, c.ToolResults)
	}
}

func TestMaxOutputTokens(t *testing.T) {
	s := fake.New()
	s.MaxOutputTokens("m", 100)
	send := func(n int) int {
		body := fmt.Sprintf(`{"model":"m","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, n)
		return do(t, s.Client(), newRequest(t, context.Background(), s.URL(), fake.Anthropic, body)).status
	}
	if a, b := send(100), send(101); a != 200 || b != 400 {
		t.Errorf("limit 100: %d for 100, %d for 101", a, b)
	}
	s.MaxOutputTokens("m", 0)
	if a, b := send(64000), send(64001); a != 200 || b != 400 {
		t.Errorf("restored limit: %d for 64000, %d for 64001", a, b)
	}
}

func TestRejectionTakesNoRateLimit(t *testing.T) {
	s := fake.New()
	s.RateLimits("m", fake.Limits{Requests: 10, InputTokens: 1000, OutputTokens: 100})
	req := newRequest(t, context.Background(), s.URL(), fake.OpenAI, oBody(`[{"role":"user"}]`, ""))
	if r := do(t, s.Client(), req); r.status != 400 || r.header.Get("X-Ratelimit-Limit-Requests") != "" {
		t.Errorf("rejection: %d, headers %v", r.status, r.header)
	}
	r := call(t, s.Client(), s.URL(), fake.OpenAI, "m")
	if got := r.header.Get("X-Ratelimit-Remaining-Requests"); got != "9" {
		t.Errorf("remaining after one accepted request = %q, want 9", got)
	}
	_ = http.StatusOK
}
