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
)

// Google errors: google.rpc.Status in {"error": …}, as the Gemini API and
// Vertex AI send them (and genai's APIError decodes them).

type googleErrorBody struct {
	Error googleStatus `json:"error"`
}

type googleStatus struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []any  `json:"details,omitempty"`
}

type googleRetryInfo struct {
	Type       string `json:"@type"`
	RetryDelay string `json:"retryDelay"`
}

// googleCodes are the google.rpc.Code names by HTTP status.
var googleCodes = map[int]string{
	400: "INVALID_ARGUMENT",
	401: "UNAUTHENTICATED",
	403: "PERMISSION_DENIED",
	404: "NOT_FOUND",
	409: "ABORTED",
	429: "RESOURCE_EXHAUSTED",
	499: "CANCELLED",
	500: "INTERNAL",
	501: "NOT_IMPLEMENTED",
	503: "UNAVAILABLE",
	504: "DEADLINE_EXCEEDED",
}

var googleMessages = map[int]string{
	400: "Request contains an invalid argument.",
	401: "Request had invalid authentication credentials.",
	403: "The caller does not have permission",
	429: "Resource has been exhausted (e.g. check quota).",
	500: "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting",
	503: "The model is overloaded. Please try again later.",
	504: "The request timed out. Please try again.",
}

// googleError is a google.rpc.Status error response. A RateLimited 429
// carries RetryInfo with the outcome's retry-after seconds as retryDelay
// ("30s"); Type sets error.status, Message error.message.
func googleError(o Outcome, ex exchange) (int, []byte, []header) {
	status := errorStatus(o, ex.format)
	code := statusName(googleCodes, status, "FAILED_PRECONDITION", "INTERNAL")
	msg := statusMessage(googleMessages, status)
	var details []any
	switch {
	case status == 404 && ex.format == Gemini:
		msg = "models/" + ex.model + " is not found for API version v1beta, or is not supported for generateContent. Call ListModels to see the list of available models and their supported methods."
	case status == 404:
		msg = "Publisher Model `" + ex.model + "` was not found or your project does not have access to it."
	case o.preset == presetSpendCap:
		msg = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
	case o.preset == presetContextTooLong:
		msg = "The input token count (208310) exceeds the maximum number of tokens allowed (200000)."
	case status == 429 && ex.format == Vertex:
		msg = "Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model with base model: " +
			ex.model + ". Please submit a quota increase request. https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai."
	case status == 429:
		msg = "You exceeded your current quota, please check your plan and billing details."
	}
	if status == 429 && o.preset != presetSpendCap {
		if d, ok := retryAfterSeconds(o); ok {
			details = append(details, googleRetryInfo{Type: "type.googleapis.com/google.rpc.RetryInfo",
				RetryDelay: strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"})
		}
	}
	return status, marshal(googleErrorBody{Error: googleStatus{Code: status, Message: o.message.or(msg),
		Status: o.errType.or(code), Details: details}}), nil
}

// googleInvalid is a 400 INVALID_ARGUMENT with message msg.
func googleInvalid(msg string) *Outcome {
	o := Status(400).Message(msg)
	o.platform = true
	return &o
}

// Gemini requests.

// parseGemini reads a GenerateContentRequest: its fields; the model and
// streaming come from the path.
func parseGemini(body []byte) request {
	var r request
	if err := json.Unmarshal(body, &r.fields); err != nil {
		r.err = err
	} else if r.fields == nil {
		r.err = fmt.Errorf("the body is null, not an object")
	}
	return r
}

// geminiFields are GenerateContentRequest's fields (genai v1.77.0's
// generateContentParametersToMldev and ToVertex).
var geminiFields = fieldSet("contents", "systemInstruction", "tools", "toolConfig", "safetySettings",
	"generationConfig", "cachedContent", "labels", "model", "serviceTier", "store", "continuationToken")

// geminiConfigFields are GenerationConfig's fields.
var geminiConfigFields = fieldSet("candidateCount", "frequencyPenalty", "imageConfig", "logprobs",
	"maxOutputTokens", "mediaResolution", "presencePenalty", "responseJsonSchema", "responseLogprobs",
	"responseMimeType", "responseModalities", "responseSchema", "seed", "speechConfig", "stopSequences",
	"temperature", "thinkingConfig", "topK", "topP", "audioTimestamp", "enableAffectiveDialog",
	"routingConfig", "modelSelectionConfig", "enableEnhancedCivicAnswers")

// geminiPartFields are the data fields of a Part, one of which is required.
var geminiPartFields = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse",
	"executableCode", "codeExecutionResult", "toolCall", "toolResponse"}

// camel is a proto JSON field name in lowerCamelCase: the APIs accept
// snake_case names too.
func camel(k string) string {
	if !strings.Contains(k, "_") {
		return k
	}
	var b strings.Builder
	up := false
	for _, r := range k {
		switch {
		case r == '_':
			up = true
		case up:
			b.WriteRune(unicode.ToUpper(r))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// camelFields re-keys fields in lowerCamelCase.
func camelFields(fields map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		out[camel(k)] = v
	}
	return out
}

func unknownName(fields map[string]json.RawMessage, known map[string]bool, at string) *Outcome {
	if f, bad := unknownField(fields, known); bad {
		name := f
		if at != "" {
			name = at + "." + f
		}
		return googleInvalid(fmt.Sprintf("Invalid JSON payload received. Unknown name %q: Cannot find field.", name))
	}
	return nil
}

// rejectGemini checks a generateContent request: the API key (Gemini) or
// token (Vertex), then the body.
func rejectGemini(ep endpoint, hr *http.Request, r request, c *carried) *Outcome {
	h := hr.Header
	key := h.Get("X-Goog-Api-Key") != "" || hr.URL.Query().Get("key") != ""
	if ep.format == Gemini && !key {
		o := Status(403).Message("Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.")
		return &o
	}
	if ep.format == VertexGemini && !key { // an API key is Vertex's express mode
		if o := checkBearer(h); o != nil {
			return o
		}
	}
	if ep.stream && !ep.sse {
		return googleInvalid("fake: streamGenerateContent is served with alt=sse only (server-sent events), not as a JSON array")
	}
	if r.err != nil {
		return googleInvalid("Invalid JSON payload received. " + r.err.Error())
	}
	fields := camelFields(r.fields)
	if o := unknownName(fields, geminiFields, ""); o != nil {
		return o
	}
	var contents []map[string]json.RawMessage
	if raw, ok := fields["contents"]; ok && present(raw) && (json.Unmarshal(raw, &contents) != nil || hasNil(contents)) {
		return googleInvalid(`Invalid value at 'contents' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content): expected a list of Content objects`)
	}
	if len(contents) == 0 {
		return googleInvalid("* GenerateContentRequest.contents: contents is not specified")
	}
	for i, ct := range contents {
		ct = camelFields(ct)
		at := fmt.Sprintf("contents[%d]", i)
		var role string
		if raw, ok := ct["role"]; ok && json.Unmarshal(raw, &role) != nil {
			return googleInvalid("Invalid value at '" + at + ".role' (TYPE_STRING), " + fmtNum(raw))
		}
		if role != "" && role != "user" && role != "model" {
			return googleInvalid("Please use a valid role: user, model.")
		}
		if o := geminiParts(ct, at, c); o != nil {
			return o
		}
	}
	if raw, ok := fields["systemInstruction"]; ok && present(raw) {
		var si map[string]json.RawMessage
		if json.Unmarshal(raw, &si) != nil || si == nil {
			return googleInvalid("Invalid value at 'system_instruction' (type.googleapis.com/google.ai.generativelanguage.v1beta.Content): expected a Content object")
		}
		if o := geminiParts(camelFields(si), "system_instruction", nil); o != nil {
			return o
		}
	}
	if o := geminiTools(fields, c); o != nil {
		return o
	}
	c.n = 1
	if raw, ok := fields["generationConfig"]; ok && present(raw) {
		if o := geminiConfig(raw, c); o != nil {
			return o
		}
	}
	return nil
}

// geminiParts checks a Content's parts and records its function responses
// (when c is not nil).
func geminiParts(ct map[string]json.RawMessage, at string, c *carried) *Outcome {
	var parts []map[string]json.RawMessage
	if raw, ok := ct["parts"]; ok && present(raw) && (json.Unmarshal(raw, &parts) != nil || hasNil(parts)) {
		return googleInvalid("Invalid value at '" + at + ".parts': expected a list of Part objects")
	}
	if len(parts) == 0 {
		return googleInvalid("* GenerateContentRequest." + at + ".parts: contents.parts must not be empty.")
	}
	for j, p := range parts {
		p = camelFields(p)
		pat := fmt.Sprintf("%s.parts[%d]", at, j)
		var data []string
		for _, k := range geminiPartFields {
			if raw, ok := p[k]; ok && present(raw) {
				data = append(data, k)
			}
		}
		switch {
		case len(data) == 0:
			return googleInvalid("* GenerateContentRequest." + pat + ".data: required oneof field 'data' must have one initialized field")
		case len(data) > 1:
			return googleInvalid("Invalid value at '" + pat + "' (oneof), oneof field 'data' is already set. Cannot set '" + data[1] + "'")
		}
		switch raw := p[data[0]]; data[0] {
		case "text":
			if !isString(raw) {
				return googleInvalid("Invalid value at '" + pat + ".text' (TYPE_STRING), " + fmtNum(raw))
			}
		case "inlineData":
			var d struct {
				MimeType  string `json:"mimeType"`
				MimeType2 string `json:"mime_type"`
				Data      string `json:"data"`
			}
			if json.Unmarshal(raw, &d) != nil || (d.MimeType == "" && d.MimeType2 == "") || d.Data == "" {
				return googleInvalid("* GenerateContentRequest." + pat + ".inline_data: mime_type and data are required")
			}
		case "functionCall":
			var fc struct {
				Name string          `json:"name"`
				Args json.RawMessage `json:"args"`
			}
			err := json.Unmarshal(raw, &fc)
			if o := geminiFunction(err, fc.Name, fc.Args, pat+".function_call", "args"); o != nil {
				return o
			}
		case "functionResponse":
			var fr struct {
				ID       string          `json:"id"`
				Name     string          `json:"name"`
				Response json.RawMessage `json:"response"`
			}
			err := json.Unmarshal(raw, &fr)
			if o := geminiFunction(err, fr.Name, fr.Response, pat+".function_response", "response"); o != nil {
				return o
			}
			if c != nil {
				id := fr.ID
				if id == "" {
					id = fr.Name
				}
				content := "{}"
				if present(fr.Response) {
					content = string(compact(fr.Response))
				}
				c.results = append(c.results, ToolResult{ID: id, Content: content})
			}
		}
	}
	return nil
}

// geminiFunction checks a decoded functionCall or functionResponse at pat
// (err is the decoding's error): its name must be set and its Struct member,
// args or response, must be an object when present.
func geminiFunction(err error, name string, value json.RawMessage, pat, member string) *Outcome {
	if err != nil || name == "" {
		return googleInvalid("* GenerateContentRequest." + pat + ".name: Name cannot be empty.")
	}
	if present(value) && !isObject(value) {
		return googleInvalid("Invalid value at '" + pat + "." + member + "' (type.googleapis.com/google.protobuf.Struct), " + fmtNum(value))
	}
	return nil
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// geminiTools checks tools and records the declared functions' names.
func geminiTools(fields map[string]json.RawMessage, c *carried) *Outcome {
	raw, ok := fields["tools"]
	if !ok || !present(raw) {
		return nil
	}
	var tools []map[string]json.RawMessage
	if json.Unmarshal(raw, &tools) != nil || hasNil(tools) {
		return googleInvalid("Invalid value at 'tools': expected a list of Tool objects")
	}
	for i, t := range tools {
		t = camelFields(t)
		fd, ok := t["functionDeclarations"]
		if !ok || !present(fd) {
			continue
		}
		var decls []map[string]json.RawMessage
		if json.Unmarshal(fd, &decls) != nil || hasNil(decls) {
			return googleInvalid(fmt.Sprintf("Invalid value at 'tools[%d].function_declarations': expected a list of FunctionDeclaration objects", i))
		}
		for j, d := range decls {
			var name string
			if json.Unmarshal(d["name"], &name) != nil || name == "" {
				return googleInvalid(fmt.Sprintf("* GenerateContentRequest.tools[%d].function_declarations[%d].name: Name cannot be empty.", i, j))
			}
			c.tools = append(c.tools, name)
		}
	}
	return nil
}

// geminiConfig checks generationConfig.
func geminiConfig(raw json.RawMessage, c *carried) *Outcome {
	var gc map[string]json.RawMessage
	if json.Unmarshal(raw, &gc) != nil || gc == nil {
		return googleInvalid("Invalid value at 'generation_config' (type.googleapis.com/google.ai.generativelanguage.v1beta.GenerationConfig): expected an object")
	}
	gc = camelFields(gc)
	if o := unknownName(gc, geminiConfigFields, "generation_config"); o != nil {
		return o
	}
	for _, b := range []numField{
		{"temperature", 0, 2, false}, {"topP", 0, 1, false}, {"topK", 0, 1 << 31, true},
		{"maxOutputTokens", 1, 1 << 31, true}, {"candidateCount", 1, 8, true},
		{"presencePenalty", -2, 2, false}, {"frequencyPenalty", -2, 2, false},
	} {
		v, ok := gc[b.name]
		if !ok || !present(v) {
			continue
		}
		f, isNum := b.read(v)
		if !isNum {
			return googleInvalid("Invalid value at 'generation_config." + b.name + "', " + fmtNum(v))
		}
		if f < b.min || f > b.max {
			return googleInvalid(fmt.Sprintf("* GenerateContentRequest.generation_config.%s: %s must be in [%g, %g], not %s",
				b.name, b.name, b.min, b.max, fmtNum(v)))
		}
		if b.name == "candidateCount" {
			c.n = int(f)
		}
	}
	if v, ok := gc["stopSequences"]; ok && present(v) {
		var ss []string
		if json.Unmarshal(v, &ss) != nil {
			return googleInvalid("Invalid value at 'generation_config.stop_sequences': expected a list of strings")
		}
		if len(ss) > 5 {
			return googleInvalid("* GenerateContentRequest.generation_config.stop_sequences: at most 5 stop sequences are allowed")
		}
	}
	mime := ""
	if v, ok := gc["responseMimeType"]; ok && present(v) {
		if json.Unmarshal(v, &mime) != nil {
			return googleInvalid("Invalid value at 'generation_config.response_mime_type' (TYPE_STRING), " + fmtNum(v))
		}
		if !slices.Contains([]string{"text/plain", "application/json", "text/x.enum"}, mime) {
			return googleInvalid("* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are `text/plain`, `application/json`, and `text/x.enum`.")
		}
	}
	for _, k := range []string{"responseSchema", "responseJsonSchema"} {
		v, ok := gc[k]
		if !ok || !present(v) {
			continue
		}
		if !isObject(v) {
			return googleInvalid("Invalid value at 'generation_config." + k + "', expected an object")
		}
		if mime != "application/json" && mime != "text/x.enum" {
			return googleInvalid("* GenerateContentRequest.generation_config." + k + ": response_mime_type must be application/json or text/x.enum when a schema is set")
		}
	}
	return nil
}

// Gemini answers.

// geminiAnswer completes a for Gemini: responseId resp_fake_N, finish STOP
// (SAFETY for a Refusal), and tool call ids only where the ToolCall set one.
func geminiAnswer(a answer, o Outcome, ex exchange) answer {
	if a.id == "" {
		a.id = "resp_fake_" + strconv.Itoa(ex.seq)
	}
	if a.finish == "" {
		a.finish = "STOP"
		if a.refusal {
			a.finish = "SAFETY"
		}
	}
	for i := range a.tools {
		if o.tools[i].ID == "" {
			a.tools[i].id = ""
		}
	}
	return a
}

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata geminiUsage       `json:"usageMetadata"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

type geminiCandidate struct {
	Content      *geminiContent `json:"content,omitempty"`
	FinishReason string         `json:"finishReason,omitempty"`
	Index        int            `json:"index"`
}

type geminiContent struct {
	Role  string `json:"role"`
	Parts []any  `json:"parts"`
}

type geminiText struct {
	Text string `json:"text"`
}

type geminiFunctionCallPart struct {
	FunctionCall geminiFunctionCall `json:"functionCall"`
}

type geminiFunctionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiUsage struct {
	PromptTokenCount        int `json:"promptTokenCount"`
	CandidatesTokenCount    int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount         int `json:"totalTokenCount"`
	CachedContentTokenCount int `json:"cachedContentTokenCount,omitempty"`
}

func (a answer) geminiUsage(out int) geminiUsage {
	return geminiUsage{PromptTokenCount: a.in, CandidatesTokenCount: out, TotalTokenCount: a.in + out,
		CachedContentTokenCount: a.cached}
}

// geminiCallParts are the answer's tool calls as functionCall parts.
func (a answer) geminiCallParts() []any {
	var parts []any
	for _, t := range a.tools {
		parts = append(parts, geminiFunctionCallPart{geminiFunctionCall{ID: t.id, Name: t.name, Args: json.RawMessage(t.args)}})
	}
	return parts
}

// geminiBody is the GenerateContentResponse of an answer: one candidate
// (candidateCount: that many) with the text part (left out when the text is
// empty and there are tool calls) and functionCall parts; a Refusal is a
// candidate with finishReason SAFETY and no content.
func geminiBody(a answer) []byte {
	var parts []any
	if a.text != "" || len(a.tools) == 0 {
		parts = append(parts, geminiText{a.text})
	}
	parts = append(parts, a.geminiCallParts()...)
	return marshal(a.geminiResponse(parts, a.finish, a.geminiUsage(a.out)))
}

func (a answer) geminiResponse(parts []any, finish string, u geminiUsage) geminiResponse {
	cands := make([]geminiCandidate, a.n)
	for i := range cands {
		cands[i] = geminiCandidate{FinishReason: finish, Index: i}
		if !a.refusal && parts != nil {
			cands[i].Content = &geminiContent{Role: "model", Parts: parts}
		}
	}
	return geminiResponse{Candidates: cands, UsageMetadata: u, ModelVersion: a.model, ResponseID: a.id}
}

// geminiStream is a streamed GenerateContentResponse: one chunk per piece
// of text, then a last chunk with the tool calls (or an empty text part),
// the finish reason and the full usage.
type geminiStream struct{ a answer }

func (s geminiStream) head() []event { return nil }

func (s geminiStream) delta(text string) []event {
	if s.a.refusal {
		return nil
	}
	return []event{{data: marshal(s.a.geminiResponse([]any{geminiText{text}}, "",
		geminiUsage{PromptTokenCount: s.a.in, TotalTokenCount: s.a.in, CachedContentTokenCount: s.a.cached}))}}
}

func (s geminiStream) tail() []event {
	parts := s.a.geminiCallParts()
	if len(parts) == 0 {
		parts = []any{geminiText{""}}
	}
	return []event{{data: marshal(s.a.geminiResponse(parts, s.a.finish, s.a.geminiUsage(s.a.out)))}}
}

// fail is an error chunk: data: {"error": google.rpc.Status}, 503
// UNAVAILABLE by default.
func (s geminiStream) fail(o Outcome) []event {
	return []event{{data: marshal(googleErrorBody{Error: googleStatus{Code: 503,
		Message: o.message.or(googleMessages[503]), Status: o.errType.or("UNAVAILABLE")}})}}
}
