package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// carried is what a request carried that tests may assert on: it is recorded
// in Call.Tools and Call.ToolResults, and n sizes an OpenAI answer.
type carried struct {
	tools   []string
	results []ToolResult
	n       int // OpenAI "n", 1 when absent
}

// reject returns the error a real API would answer an invalid request with,
// or nil when the request is acceptable, and what the request carried.
// Authentication is checked first, as the real APIs do.
func reject(ep endpoint, hr *http.Request, r request, maxOut func(string) int, region string) (*Outcome, carried) {
	var c carried
	h := hr.Header
	switch ep.format {
	case Anthropic:
		return rejectAnthropic(h, r, maxOut, &c), c
	case Bedrock:
		return rejectBedrock(h, r, maxOut, region, &c), c
	case Vertex:
		return rejectVertex(h, r, maxOut, &c), c
	case Gemini, VertexGemini:
		return rejectGemini(ep, hr, r, &c), c
	case Azure:
		return rejectAzure(ep, hr, r, &c), c
	}
	return rejectOpenAI(h, r, &c), c
}

func invalid(status int, msg string) *Outcome {
	o := Status(status).Message(msg)
	return &o
}

func invalidParam(msg, param, code string) *Outcome {
	o := Status(400).Message(msg).Code(code)
	o.param = set(param)
	return &o
}

// anthropicVersions are the anthropic-version values the fake accepts.
var anthropicVersions = []string{"2023-01-01", "2023-06-01", "2026-10-21"}

// anthropicFields are the top-level Messages API parameters: every field of
// anthropic-sdk-go v2.15.0's MessageNewParams and BetaMessageNewParams, plus
// stream and the deprecated sampling parameters temperature, top_k and top_p.
var anthropicFields = fieldSet(
	"model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream",
	"temperature", "top_k", "top_p", "tools", "tool_choice", "thinking", "service_tier",
	"output_config", "output_format", "container", "mcp_servers", "context_management",
	"inference_geo", "speed", "cache_control", "diagnostics", "compaction", "fallbacks",
	"fallback_credit_token", "billing_policy", "thread",
)

// openaiFields are the top-level Chat Completions parameters: every field of
// openai-go v3.98.0's ChatCompletionNewParams, plus stream.
var openaiFields = fieldSet(
	"audio", "frequency_penalty", "function_call", "functions", "logit_bias", "logprobs",
	"max_completion_tokens", "max_tokens", "messages", "metadata", "modalities", "model",
	"moderation", "n", "parallel_tool_calls", "prediction", "presence_penalty",
	"prompt_cache_key", "prompt_cache_options", "prompt_cache_retention", "reasoning_effort",
	"response_format", "safety_identifier", "seed", "service_tier", "stop", "store", "stream",
	"stream_options", "temperature", "tool_choice", "tools", "top_logprobs", "top_p", "user",
	"verbosity", "web_search_options",
)

func fieldSet(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// unknownField returns the alphabetically first field of fields not in known.
func unknownField(fields map[string]json.RawMessage, known map[string]bool) (string, bool) {
	var bad []string
	for k := range fields {
		if !known[k] {
			bad = append(bad, k)
		}
	}
	if len(bad) == 0 {
		return "", false
	}
	slices.Sort(bad)
	return bad[0], true
}

// maxOutputTokens is the largest max_tokens the fake accepts for an Anthropic
// model, from the model's name (see the package documentation).
func maxOutputTokens(model string) int {
	switch {
	case strings.Contains(model, "claude-3-5-") || strings.Contains(model, "claude-3.5-"):
		return 8192
	case strings.Contains(model, "claude-3-7-"):
		return 64000
	case strings.Contains(model, "claude-3-"):
		return 4096
	case strings.Contains(model, "claude-opus-4-0") || strings.Contains(model, "claude-opus-4-1") ||
		strings.Contains(model, "claude-opus-4-2025") || strings.Contains(model, "claude-opus-4@"):
		return 32000
	case strings.Contains(model, "claude-opus-4-5"):
		return 64000
	case strings.Contains(model, "opus"):
		return 128000
	}
	return 64000
}

// number decodes a JSON number; ok is false for any other value.
func number(raw json.RawMessage) (float64, bool) {
	var f float64
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, false
	}
	return f, json.Unmarshal(t, &f) == nil
}

// integer decodes a JSON integer; ok is false for any other value.
func integer(raw json.RawMessage) (int64, bool) {
	var n int64
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return 0, false
	}
	return n, json.Unmarshal(t, &n) == nil
}

// numField is a numeric request field and the range it must be in; an
// integer field takes only whole numbers written as such.
type numField struct {
	name     string
	min, max float64
	integer  bool
}

// read is the field's value raw as a number; ok is false when raw is not a
// number, or, for an integer field, not an integer.
func (b numField) read(raw json.RawMessage) (v float64, ok bool) {
	v, ok = number(raw)
	if ok && b.integer {
		_, ok = integer(raw)
	}
	return v, ok
}

func present(raw json.RawMessage) bool { return raw != nil && string(bytes.TrimSpace(raw)) != "null" }

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' && json.Valid(t)
}

func fmtNum(raw json.RawMessage) string { return string(bytes.TrimSpace(raw)) }

func endsInSpace(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && unicode.IsSpace(r)
}

// Anthropic.

func rejectAnthropic(h http.Header, r request, maxOut func(string) int, c *carried) *Outcome {
	bearer := false
	if scheme, key, ok := strings.Cut(strings.TrimSpace(h.Get("Authorization")), " "); ok &&
		strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(key) != "" {
		bearer = true
	}
	if h.Get("X-Api-Key") == "" && !bearer {
		return invalid(401, "x-api-key header is required")
	}
	switch v := h.Get("Anthropic-Version"); {
	case v == "":
		return invalid(400, "anthropic-version: header is required")
	case !slices.Contains(anthropicVersions, v):
		return invalid(400, fmt.Sprintf("anthropic-version: invalid version %q; supported versions: %s",
			v, strings.Join(anthropicVersions, ", ")))
	}
	return checkAnthropicBody(r, maxOut, c)
}

// checkAnthropicBody checks the body of a Messages request.
func checkAnthropicBody(r request, maxOut func(string) int, c *carried) *Outcome {
	if r.err != nil {
		return invalid(400, "There was an error parsing the body of your request: "+r.err.Error())
	}
	if !isString(r.fields["model"]) {
		return invalid(400, "model: Field required")
	}
	if r.model == "" {
		return invalid(400, "model: String should have at least 1 character")
	}
	mt, ok := r.fields["max_tokens"]
	if !ok {
		return invalid(400, "max_tokens: Field required")
	}
	n, ok := integer(mt)
	if !ok {
		return invalid(400, "max_tokens: Input should be a valid integer")
	}
	if n < 0 {
		return invalid(400, "max_tokens: Input should be greater than or equal to 0")
	}
	if limit := maxOut(r.model); n > int64(limit) {
		return invalid(400, fmt.Sprintf("max_tokens: %d > %d, which is the maximum allowed number of output tokens for %s", n, limit, r.model))
	}
	msgs, ok := r.fields["messages"]
	if !ok {
		return invalid(400, "messages: Field required")
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(msgs, &list) != nil || hasNil(list) {
		return invalid(400, "messages: Input should be a valid list of message objects")
	}
	if len(list) == 0 {
		return invalid(400, "messages: at least one message is required")
	}
	if f, bad := unknownField(r.fields, anthropicFields); bad {
		return invalid(400, f+": Extra inputs are not permitted")
	}
	if o := checkAnthropicMessages(list, c); o != nil {
		return o
	}
	if raw, ok := r.fields["system"]; ok && present(raw) {
		if o := anthropicSystem(raw); o != nil {
			return o
		}
	}
	for _, p := range []string{"temperature", "top_p"} {
		raw, ok := r.fields[p]
		if !ok || !present(raw) {
			continue
		}
		v, ok := number(raw)
		switch {
		case !ok:
			return invalid(400, p+": Input should be a valid number")
		case v < 0:
			return invalid(400, p+": Input should be greater than or equal to 0")
		case v > 1:
			return invalid(400, p+": Input should be less than or equal to 1")
		}
	}
	if raw, ok := r.fields["top_k"]; ok && present(raw) {
		if v, ok := integer(raw); !ok {
			return invalid(400, "top_k: Input should be a valid integer")
		} else if v < 0 {
			return invalid(400, "top_k: Input should be greater than or equal to 0")
		}
	}
	if !isBoolOrAbsent(r.fields["stream"]) {
		return invalid(400, "stream: Input should be a valid boolean")
	}
	if raw, ok := r.fields["stop_sequences"]; ok && present(raw) {
		var ss []string
		if json.Unmarshal(raw, &ss) != nil {
			return invalid(400, "stop_sequences: Input should be a valid list of strings")
		}
	}
	if o := anthropicTools(r.fields, c); o != nil {
		return o
	}
	return nil
}

// anthropicBlockTypes are the content block types the fake accepts in
// messages.
var anthropicBlockTypes = []string{
	"text", "image", "document", "search_result", "tool_use", "tool_result", "thinking",
	"redacted_thinking", "server_tool_use", "web_search_tool_result", "web_fetch_tool_result",
	"code_execution_tool_result", "bash_code_execution_tool_result",
	"text_editor_code_execution_tool_result", "tool_search_tool_result", "container_upload",
	"mcp_tool_use", "mcp_tool_result", "compaction",
}

type anthropicTurn struct {
	role     string
	first    int      // index of the turn's first message
	toolUses []string // tool_use ids, in order
	results  []string // tool_result tool_use_ids, in order
	resultAt []string // each result's path, for errors
}

func checkAnthropicMessages(list []map[string]json.RawMessage, c *carried) *Outcome {
	var turns []*anthropicTurn
	for i, m := range list {
		var role string
		_ = json.Unmarshal(m["role"], &role)
		if role != "user" && role != "assistant" {
			return invalid(400, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		}
		raw, ok := m["content"]
		if !ok {
			return invalid(400, fmt.Sprintf("messages.%d.content: Field required", i))
		}
		finalAssistant := i == len(list)-1 && role == "assistant"
		if len(turns) == 0 || turns[len(turns)-1].role != role {
			turns = append(turns, &anthropicTurn{role: role, first: i})
		}
		t := turns[len(turns)-1]
		empty := fmt.Sprintf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
		trailing := "messages: final assistant content cannot end with trailing whitespace"
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if s == "" && !finalAssistant {
				return invalid(400, empty)
			}
			if finalAssistant && endsInSpace(s) {
				return invalid(400, trailing)
			}
			continue
		}
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(raw, &blocks) != nil {
			return invalid(400, fmt.Sprintf("messages.%d.content: Input should be a valid list", i))
		}
		if len(blocks) == 0 && !finalAssistant {
			return invalid(400, empty)
		}
		for j, b := range blocks {
			at := fmt.Sprintf("messages.%d.content.%d", i, j)
			if b == nil {
				return invalid(400, at+": Input should be a valid dictionary or object to extract fields from")
			}
			if o := checkAnthropicBlock(at, role, b, t, c); o != nil {
				return o
			}
		}
		if finalAssistant && len(blocks) > 0 {
			last := blocks[len(blocks)-1]
			var typ, text string
			_ = json.Unmarshal(last["type"], &typ)
			_ = json.Unmarshal(last["text"], &text)
			if typ == "text" && endsInSpace(text) {
				return invalid(400, trailing)
			}
		}
	}
	// Every tool_use must be answered in the next turn, every tool_result
	// must answer a tool_use of the previous one; consecutive messages of one
	// role are one turn, as the API merges them.
	for k, t := range turns {
		if len(t.results) > 0 {
			var prev []string
			if k > 0 {
				prev = turns[k-1].toolUses
			}
			for x, id := range t.results {
				if !slices.Contains(prev, id) {
					return invalid(400, fmt.Sprintf("%s: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", t.resultAt[x], id))
				}
			}
		}
	}
	for k, t := range turns {
		if len(t.toolUses) > 0 && k < len(turns)-1 {
			var missing []string
			for _, id := range t.toolUses {
				if !slices.Contains(turns[k+1].results, id) {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				return invalid(400, fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", turns[k+1].first, strings.Join(missing, ", ")))
			}
		}
	}
	return nil
}

// checkOpenAIFile refuses a file part (at) whose file_data is a data: URL
// of another media type than application/pdf: the only file type Chat
// Completions takes.
func checkOpenAIFile(at string, raw json.RawMessage) *Outcome {
	var f struct {
		FileData string `json:"file_data"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return nil
	}
	rest, ok := strings.CutPrefix(f.FileData, "data:")
	if !ok {
		return nil
	}
	mt, _, _ := strings.Cut(rest, ";")
	if mt == "application/pdf" {
		return nil
	}
	param := at + ".file.file_data"
	return invalidParam(fmt.Sprintf("Invalid file data: '%s'. Expected a base64-encoded data URL with an application/pdf MIME type (e.g. 'data:application/pdf;base64,SGVsbG8sIFdvcmxkIQ=='), but got unsupported MIME type '%s'.", param, mt), param, "invalid_value")
}

// anthropicMediaTypes are the media types the Messages API takes, by block
// and source type: the only ones an inline image or document may declare.
var anthropicMediaTypes = map[[2]string][]string{
	{"image", "base64"}:    {"image/jpeg", "image/png", "image/gif", "image/webp"},
	{"document", "base64"}: {"application/pdf"},
	{"document", "text"}:   {"text/plain"},
}

// checkAnthropicMediaType refuses the media type of an image or document
// block's source (block, of source type src) that the API does not take.
func checkAnthropicMediaType(at, block, src, mediaType string) *Outcome {
	allowed, ok := anthropicMediaTypes[[2]string{block, src}]
	if !ok || slices.Contains(allowed, mediaType) {
		return nil
	}
	quoted := make([]string, len(allowed))
	for i, mt := range allowed {
		quoted[i] = "'" + mt + "'"
	}
	list := quoted[len(quoted)-1]
	if len(quoted) > 1 {
		list = strings.Join(quoted[:len(quoted)-1], ", ") + " or " + list
	}
	return invalid(400, fmt.Sprintf("%s.%s.source.%s.media_type: Input should be %s", at, block, src, list))
}

// anthropicBlock checks one content block of a message and records its tool
// use or result in t and c.
func checkAnthropicBlock(at, role string, b map[string]json.RawMessage, t *anthropicTurn, c *carried) *Outcome {
	var typ string
	if json.Unmarshal(b["type"], &typ) != nil || typ == "" {
		return invalid(400, at+".type: Field required")
	}
	if !slices.Contains(anthropicBlockTypes, typ) {
		return invalid(400, fmt.Sprintf("%s: Input tag '%s' found using 'type' does not match any of the expected tags: '%s'", at, typ, strings.Join(anthropicBlockTypes, "', '")))
	}
	switch typ {
	case "text":
		if !isString(b["text"]) {
			return invalid(400, at+".text: Field required")
		}
		var s string
		_ = json.Unmarshal(b["text"], &s)
		if s == "" {
			return invalid(400, "messages: text content blocks must be non-empty")
		}
	case "image", "document":
		src := b["source"]
		var s struct {
			Type      string `json:"type"`
			MediaType string `json:"media_type"`
		}
		if !isObject(src) || json.Unmarshal(src, &s) != nil || s.Type == "" {
			return invalid(400, at+".source: Field required")
		}
		if role != "user" {
			return invalid(400, fmt.Sprintf("%s: %s blocks are only allowed in user messages", at, typ))
		}
		if o := checkAnthropicMediaType(at, typ, s.Type, s.MediaType); o != nil {
			return o
		}
	case "tool_use", "server_tool_use", "mcp_tool_use":
		var id, name string
		if json.Unmarshal(b["id"], &id) != nil || id == "" {
			return invalid(400, at+".id: Field required")
		}
		if json.Unmarshal(b["name"], &name) != nil || name == "" {
			return invalid(400, at+".name: Field required")
		}
		if !isObject(b["input"]) {
			return invalid(400, at+".input: Input should be a valid dictionary")
		}
		if role != "assistant" {
			return invalid(400, fmt.Sprintf("%s: tool_use blocks are only allowed in assistant messages", at))
		}
		if typ == "tool_use" {
			t.toolUses = append(t.toolUses, id)
		}
	case "tool_result":
		var id string
		if json.Unmarshal(b["tool_use_id"], &id) != nil || id == "" {
			return invalid(400, at+".tool_use_id: Field required")
		}
		if role != "user" {
			return invalid(400, fmt.Sprintf("%s: tool_result blocks are only allowed in user messages", at))
		}
		res := ToolResult{ID: id}
		_ = json.Unmarshal(b["is_error"], &res.IsError)
		if raw, ok := b["content"]; ok && present(raw) {
			var s string
			var parts []map[string]json.RawMessage
			switch {
			case json.Unmarshal(raw, &s) == nil:
				res.Content = s
			case json.Unmarshal(raw, &parts) == nil:
				for k, p := range parts {
					var pt, text string
					_ = json.Unmarshal(p["type"], &pt)
					if pt == "" {
						return invalid(400, fmt.Sprintf("%s.content.%d.type: Field required", at, k))
					}
					if pt == "text" && json.Unmarshal(p["text"], &text) == nil {
						res.Content += text
					}
				}
			default:
				return invalid(400, at+".content: Input should be a valid list")
			}
		}
		t.results = append(t.results, id)
		t.resultAt = append(t.resultAt, at)
		c.results = append(c.results, res)
	}
	return nil
}

func anthropicSystem(raw json.RawMessage) *Outcome {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return nil
	}
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(raw, &blocks) != nil {
		return invalid(400, "system: Input should be a valid list")
	}
	for i, b := range blocks {
		var typ, text string
		if b != nil {
			_ = json.Unmarshal(b["type"], &typ)
		}
		if typ != "text" {
			return invalid(400, fmt.Sprintf("system.%d.type: Input should be 'text'", i))
		}
		if json.Unmarshal(b["text"], &text) != nil {
			return invalid(400, fmt.Sprintf("system.%d.text: Field required", i))
		}
		if text == "" {
			return invalid(400, "system: text content blocks must be non-empty")
		}
	}
	return nil
}

func anthropicTools(fields map[string]json.RawMessage, c *carried) *Outcome {
	raw, ok := fields["tools"]
	if ok && present(raw) {
		var tools []map[string]json.RawMessage
		if json.Unmarshal(raw, &tools) != nil {
			return invalid(400, "tools: Input should be a valid list")
		}
		for i, t := range tools {
			var name, typ string
			if t != nil {
				_ = json.Unmarshal(t["type"], &typ)
			}
			if t == nil || json.Unmarshal(t["name"], &name) != nil || name == "" {
				return invalid(400, fmt.Sprintf("tools.%d.name: Field required", i))
			}
			if (typ == "" || typ == "custom") && !isObject(t["input_schema"]) {
				return invalid(400, fmt.Sprintf("tools.%d.custom.input_schema: Field required", i))
			}
			c.tools = append(c.tools, name)
		}
	}
	raw, ok = fields["tool_choice"]
	if !ok || !present(raw) {
		return nil
	}
	var tc struct {
		Type string  `json:"type"`
		Name *string `json:"name"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &tc) != nil {
		return invalid(400, "tool_choice: Input should be a valid dictionary or object to extract fields from")
	}
	switch tc.Type {
	case "auto", "any", "none":
	case "tool":
		if tc.Name == nil || *tc.Name == "" {
			return invalid(400, "tool_choice.tool.name: Field required")
		}
	default:
		return invalid(400, fmt.Sprintf("tool_choice: Input tag '%s' found using 'type' does not match any of the expected tags: 'auto', 'any', 'tool', 'none'", tc.Type))
	}
	return nil
}

// OpenAI.

func rejectOpenAI(h http.Header, r request, c *carried) *Outcome {
	auth := h.Get("Authorization")
	if auth == "" {
		o := Status(401).Message("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).").Code("")
		return &o
	}
	if scheme, key, _ := strings.Cut(auth, " "); !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return invalid(401, "Incorrect API key provided.")
	}
	return checkOpenAIBody(r, c)
}

// checkOpenAIBody checks the body of a Chat Completions request.
func checkOpenAIBody(r request, c *carried) *Outcome {
	if r.err != nil {
		return invalid(400, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	if f, bad := unknownField(r.fields, openaiFields); bad {
		o := Status(400).Message("Unrecognized request argument supplied: " + f).Code("")
		return &o
	}
	if r.model == "" {
		return invalid(400, "you must provide a model parameter")
	}
	msgs, ok := r.fields["messages"]
	if !ok {
		return invalidParam("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(msgs, &list) != nil || hasNil(list) {
		return invalidParam("Invalid type for 'messages': expected an array of objects.", "messages", "invalid_type")
	}
	if len(list) == 0 {
		return invalidParam("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "messages", "empty_array")
	}
	if o := checkOpenAIMessages(list, c); o != nil {
		return o
	}
	for _, b := range []numField{
		{"temperature", 0, 2, false}, {"top_p", 0, 1, false},
		{"frequency_penalty", -2, 2, false}, {"presence_penalty", -2, 2, false},
		{"n", 1, 128, true}, {"max_completion_tokens", 1, 1 << 31, true}, {"max_tokens", 1, 1 << 31, true},
		{"top_logprobs", 0, 20, true},
	} {
		raw, ok := r.fields[b.name]
		if !ok || !present(raw) {
			continue
		}
		kind, want := "decimal", "a number"
		if b.integer {
			kind, want = "integer", "an integer"
		}
		v, ok := b.read(raw)
		switch {
		case !ok:
			return invalidParam(fmt.Sprintf("Invalid type for '%s': expected %s, but got %s instead.", b.name, want, jsonKind(raw)), b.name, "invalid_type")
		case v < b.min:
			return invalidParam(fmt.Sprintf("Invalid '%s': %s below minimum value. Expected a value >= %s, but got %s instead.", b.name, kind, strconv.FormatFloat(b.min, 'f', -1, 64), fmtNum(raw)), b.name, kind+"_below_min_value")
		case v > b.max:
			return invalidParam(fmt.Sprintf("Invalid '%s': %s above maximum value. Expected a value <= %s, but got %s instead.", b.name, kind, strconv.FormatFloat(b.max, 'f', -1, 64), fmtNum(raw)), b.name, kind+"_above_max_value")
		}
		if b.name == "n" {
			c.n = int(v)
		}
	}
	if raw := r.fields["stream"]; !isBoolOrAbsent(raw) {
		return invalidParam("Invalid type for 'stream': expected a boolean, but got "+jsonKind(raw)+" instead.", "stream", "invalid_type")
	}
	if raw := r.fields["stream_options"]; !r.stream && present(raw) {
		o := Status(400).Message("The 'stream_options' parameter is only allowed when 'stream' is enabled.").Code("")
		o.param = set("stream_options")
		return &o
	}
	if o := openaiTools(r.fields, c); o != nil {
		return o
	}
	if raw, ok := r.fields["response_format"]; ok && present(raw) {
		var rf struct {
			Type       string          `json:"type"`
			JSONSchema json.RawMessage `json:"json_schema"`
		}
		if !isObject(raw) || json.Unmarshal(raw, &rf) != nil {
			return invalidParam("Invalid type for 'response_format': expected an object, but got "+jsonKind(raw)+" instead.", "response_format", "invalid_type")
		}
		switch rf.Type {
		case "text", "json_object":
		case "json_schema":
			var js struct {
				Name string `json:"name"`
			}
			if !isObject(rf.JSONSchema) {
				return invalidParam("Missing required parameter: 'response_format.json_schema'.", "response_format.json_schema", "missing_required_parameter")
			}
			if json.Unmarshal(rf.JSONSchema, &js) != nil || js.Name == "" {
				return invalidParam("Missing required parameter: 'response_format.json_schema.name'.", "response_format.json_schema.name", "missing_required_parameter")
			}
		default:
			return invalidParam(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text', 'json_object', and 'json_schema'.", rf.Type), "response_format.type", "invalid_value")
		}
	}
	return nil
}

// openaiPartTypes are the content part types each role may send.
var openaiPartTypes = map[string][]string{
	"system":    {"text"},
	"developer": {"text"},
	"user":      {"text", "image_url", "input_audio", "file"},
	"assistant": {"text", "refusal"},
	"tool":      {"text"},
}

func checkOpenAIMessages(list []map[string]json.RawMessage, c *carried) *Outcome {
	var pending []string // tool_call_ids of the last assistant message, unanswered
	pendingAt := -1      // that assistant message's index
	var answerable []string
	inTools := false // the previous message is a tool message or an assistant with tool_calls
	checkPending := func() *Outcome {
		if len(pending) > 0 {
			return invalidParam("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: "+strings.Join(pending, ", "),
				fmt.Sprintf("messages.[%d].role", pendingAt), "")
		}
		return nil
	}
	for i, m := range list {
		var role string
		_ = json.Unmarshal(m["role"], &role)
		switch role {
		case "system", "developer", "user", "assistant", "tool", "function":
		default:
			return invalidParam(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", role),
				fmt.Sprintf("messages[%d].role", i), "invalid_value")
		}
		if role != "tool" {
			if o := checkPending(); o != nil {
				return o
			}
			inTools, answerable = false, nil
		}
		raw, hasContent := m["content"]
		hasContent = hasContent && present(raw)
		toolCalls := m["tool_calls"]
		switch {
		case role == "function":
			continue
		case !hasContent && role == "assistant":
			if !present(toolCalls) && !present(m["function_call"]) && !present(m["audio"]) {
				return invalidParam(fmt.Sprintf("Invalid value for 'content': expected a string, got null. Missing required parameter: 'messages[%d].content'.", i),
					fmt.Sprintf("messages[%d].content", i), "missing_required_parameter")
			}
		case !hasContent:
			return invalidParam(fmt.Sprintf("Missing required parameter: 'messages[%d].content'.", i),
				fmt.Sprintf("messages[%d].content", i), "missing_required_parameter")
		}
		text := ""
		if hasContent {
			var s string
			var parts []map[string]json.RawMessage
			switch {
			case json.Unmarshal(raw, &s) == nil:
				text = s
			case json.Unmarshal(raw, &parts) == nil && !hasNil(parts):
				for j, p := range parts {
					at := fmt.Sprintf("messages[%d].content[%d]", i, j)
					var pt string
					_ = json.Unmarshal(p["type"], &pt)
					if pt == "" {
						return invalidParam(fmt.Sprintf("Missing required parameter: '%s.type'.", at), at+".type", "missing_required_parameter")
					}
					allowed := openaiPartTypes[role]
					if !slices.Contains(allowed, pt) {
						return invalidParam(fmt.Sprintf("Invalid value: '%s'. Supported values are: '%s'.", pt, strings.Join(allowed, "', '")), at+".type", "invalid_value")
					}
					field := map[string]string{"text": "text", "image_url": "image_url", "input_audio": "input_audio", "file": "file", "refusal": "refusal"}[pt]
					if !present(p[field]) {
						return invalidParam(fmt.Sprintf("Missing required parameter: '%s.%s'.", at, field), at+"."+field, "missing_required_parameter")
					}
					if pt == "text" {
						var t string
						if json.Unmarshal(p["text"], &t) != nil {
							return invalidParam(fmt.Sprintf("Invalid type for '%s.text': expected a string, but got %s instead.", at, jsonKind(p["text"])), at+".text", "invalid_type")
						}
						text += t
					}
					if pt == "file" {
						if o := checkOpenAIFile(at, p["file"]); o != nil {
							return o
						}
					}
				}
			default:
				return invalidParam(fmt.Sprintf("Invalid type for 'messages[%d].content': expected one of a string or array of objects, but got %s instead.", i, jsonKind(raw)),
					fmt.Sprintf("messages[%d].content", i), "invalid_type")
			}
		}
		switch role {
		case "assistant":
			if !present(toolCalls) {
				break
			}
			var calls []map[string]json.RawMessage
			if json.Unmarshal(toolCalls, &calls) != nil || hasNil(calls) {
				return invalidParam(fmt.Sprintf("Invalid type for 'messages[%d].tool_calls': expected an array of objects, but got %s instead.", i, jsonKind(toolCalls)),
					fmt.Sprintf("messages[%d].tool_calls", i), "invalid_type")
			}
			for j, tc := range calls {
				at := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
				var id, typ string
				if json.Unmarshal(tc["id"], &id) != nil || id == "" {
					return invalidParam(fmt.Sprintf("Missing required parameter: '%s.id'.", at), at+".id", "missing_required_parameter")
				}
				_ = json.Unmarshal(tc["type"], &typ)
				switch typ {
				case "function":
					var fn struct {
						Name      *string `json:"name"`
						Arguments *string `json:"arguments"`
					}
					if !isObject(tc["function"]) || json.Unmarshal(tc["function"], &fn) != nil {
						return invalidParam(fmt.Sprintf("Missing required parameter: '%s.function'.", at), at+".function", "missing_required_parameter")
					}
					if fn.Name == nil {
						return invalidParam(fmt.Sprintf("Missing required parameter: '%s.function.name'.", at), at+".function.name", "missing_required_parameter")
					}
					if fn.Arguments == nil {
						return invalidParam(fmt.Sprintf("Missing required parameter: '%s.function.arguments'.", at), at+".function.arguments", "missing_required_parameter")
					}
				case "custom":
				case "":
					return invalidParam(fmt.Sprintf("Missing required parameter: '%s.type'.", at), at+".type", "missing_required_parameter")
				default:
					return invalidParam(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", typ), at+".type", "invalid_value")
				}
				pending = append(pending, id)
				answerable = append(answerable, id)
			}
			pendingAt, inTools = i, len(calls) > 0
		case "tool":
			var id string
			if json.Unmarshal(m["tool_call_id"], &id) != nil || id == "" {
				return invalidParam(fmt.Sprintf("Missing required parameter: 'messages[%d].tool_call_id'.", i),
					fmt.Sprintf("messages[%d].tool_call_id", i), "missing_required_parameter")
			}
			if !inTools {
				return invalidParam("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
					fmt.Sprintf("messages.[%d].role", i), "")
			}
			if !slices.Contains(answerable, id) {
				return invalidParam(fmt.Sprintf("Invalid parameter: 'tool_call_id' of '%s' not found in 'tool_calls' of previous message.", id),
					fmt.Sprintf("messages.[%d].tool_call_id", i), "")
			}
			pending = slices.DeleteFunc(pending, func(p string) bool { return p == id })
			c.results = append(c.results, ToolResult{ID: id, Content: text})
		}
	}
	return checkPending()
}

func openaiTools(fields map[string]json.RawMessage, c *carried) *Outcome {
	raw, hasTools := fields["tools"]
	hasTools = hasTools && present(raw)
	if hasTools {
		var tools []map[string]json.RawMessage
		if json.Unmarshal(raw, &tools) != nil || hasNil(tools) {
			return invalidParam("Invalid type for 'tools': expected an array of objects, but got "+jsonKind(raw)+" instead.", "tools", "invalid_type")
		}
		for i, t := range tools {
			at := fmt.Sprintf("tools[%d]", i)
			var typ string
			_ = json.Unmarshal(t["type"], &typ)
			switch typ {
			case "function":
				var fn struct {
					Name string `json:"name"`
				}
				if !isObject(t["function"]) {
					return invalidParam(fmt.Sprintf("Missing required parameter: '%s.function'.", at), at+".function", "missing_required_parameter")
				}
				if json.Unmarshal(t["function"], &fn) != nil || fn.Name == "" {
					return invalidParam(fmt.Sprintf("Missing required parameter: '%s.function.name'.", at), at+".function.name", "missing_required_parameter")
				}
				c.tools = append(c.tools, fn.Name)
			case "custom":
				var cu struct {
					Name string `json:"name"`
				}
				if json.Unmarshal(t["custom"], &cu) != nil || cu.Name == "" {
					return invalidParam(fmt.Sprintf("Missing required parameter: '%s.custom.name'.", at), at+".custom.name", "missing_required_parameter")
				}
				c.tools = append(c.tools, cu.Name)
			case "":
				return invalidParam(fmt.Sprintf("Missing required parameter: '%s.type'.", at), at+".type", "missing_required_parameter")
			default:
				return invalidParam(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'function' and 'custom'.", typ), at+".type", "invalid_value")
			}
		}
	}
	raw, ok := fields["tool_choice"]
	if !ok || !present(raw) {
		return nil
	}
	if !hasTools {
		return invalidParam("Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.", "tool_choice", "")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "none" && s != "auto" && s != "required" {
			return invalidParam(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'none', 'auto', and 'required'.", s), "tool_choice", "invalid_value")
		}
		return nil
	}
	var tc struct {
		Type     string `json:"type"`
		Function *struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &tc) != nil {
		return invalidParam("Invalid type for 'tool_choice': expected one of a string or object, but got "+jsonKind(raw)+" instead.", "tool_choice", "invalid_type")
	}
	if tc.Type == "function" && (tc.Function == nil || tc.Function.Name == "") {
		return invalidParam("Missing required parameter: 'tool_choice.function.name'.", "tool_choice.function.name", "missing_required_parameter")
	}
	return nil
}

// hasNil reports whether a decoded list of objects holds a null (or a
// non-object, which decodes to an error before this is asked).
func hasNil(list []map[string]json.RawMessage) bool {
	return slices.ContainsFunc(list, func(m map[string]json.RawMessage) bool { return m == nil })
}
