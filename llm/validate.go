package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
)

// maxToolName is the longest tool name every provider accepts.
const maxToolName = 64

// Validate checks that req is a conversation every provider could take,
// before anything is sent: each message has content; each part has exactly
// one field set and a role that may carry it (Media and ToolResult in a
// user message, ToolCall in an assistant message); every ToolResult
// answers a ToolCall made earlier in the conversation, and no call is
// answered twice; tools have unique, well-formed names and JSON schemas;
// ToolChoice names a tool of the request; ResponseSchema is JSON.
//
// A failure is an *Error of KindBadRequest (Provider "backstop") whose
// Message names the message and part by position, never their content; the
// id or name at fault is in Detail.
func (r *Request) Validate() error {
	var calls map[string]bool // call id -> answered; made at the first call
	for i := range r.Messages {
		m := &r.Messages[i]
		if m.Role != RoleUser && m.Role != RoleAssistant || m.Content == "" && len(m.Parts) == 0 {
			return messageProblem(i, m)
		}
		for j := range m.Parts {
			if err := checkPart(&calls, m.Role, i, j, &m.Parts[j]); err != nil {
				return err
			}
		}
	}
	// Field by field: comparing ToolChoice with its zero value as a whole
	// calls memequal.
	if len(r.Tools) == 0 && r.ToolChoice.Mode == 0 && r.ToolChoice.Name == "" && len(r.ResponseSchema) == 0 {
		return nil // no tools, tool choice or response schema to check
	}
	return r.checkTools()
}

// Validate checks that p holds only what a request body can carry:
// MaxTokens not negative, a Temperature and TopP that are finite (JSON has
// no NaN or infinity), and Extra values encoding/json can marshal. A
// provider would fail every request carrying such Params as a bad request.
//
// It returns nil, or every problem joined (errors.Join), each an *Error of
// KindBadRequest (Provider "backstop") whose Message says what to change
// and whose Detail names the field ("Params.TopP", `Params.Extra["k"]`).
// A chain's Build runs it on each target's Params; Request.Validate does
// not, since an Extra is marshaled when the request is encoded anyway.
func (p Params) Validate() error {
	var found []error
	if p.MaxTokens < 0 {
		found = append(found, badRequest(fmt.Sprintf("Params.MaxTokens is %d; it must not be negative (0 means the provider's default)", p.MaxTokens), "Params.MaxTokens"))
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"Temperature", p.Temperature}, {"TopP", p.TopP}} {
		if f.v != nil && (math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			found = append(found, badRequest(fmt.Sprintf("Params.%s is %v; JSON cannot carry it: use a finite number, or nil for the provider's default", f.name, *f.v), "Params."+f.name))
		}
	}
	keys := make([]string, 0, len(p.Extra))
	for k := range p.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := json.Marshal(p.Extra[k]); err != nil {
			field := fmt.Sprintf("Params.Extra[%q]", k)
			found = append(found, badRequest(fmt.Sprintf("%s cannot be encoded as JSON (%v); use a value encoding/json can marshal", field, err), field))
		}
	}
	return errors.Join(found...)
}

// messageProblem says what is wrong with message i, m, whose role or
// content Validate refused: apart from Validate, so that the loop every
// call runs holds no formatting.
func messageProblem(i int, m *Message) error {
	if m.Role != RoleUser && m.Role != RoleAssistant {
		return badRequest(fmt.Sprintf("message %d: role %q is neither %q nor %q (the system prompt goes in Request.System)", i, m.Role, RoleUser, RoleAssistant), "")
	}
	return badRequest(fmt.Sprintf("message %d (%s) is empty: set Content or Parts", i, m.Role), "")
}

// checkPart checks part j of message i (role), recording the tool calls
// made and answered in calls.
func checkPart(callsp *map[string]bool, role Role, i, j int, p *Part) error {
	calls := *callsp
	at := func(format string, args ...any) string {
		return fmt.Sprintf("message %d (%s), part %d: ", i, role, j) + fmt.Sprintf(format, args...)
	}
	switch n := p.set(); {
	case n == 0:
		return badRequest(at("the part is empty: set exactly one of Text, Media, ToolCall, ToolResult"), "")
	case n > 1:
		return badRequest(at("the part sets %d fields: set exactly one of Text, Media, ToolCall, ToolResult", n), "")
	}
	switch {
	case p.Media != nil:
		if role != RoleUser {
			return badRequest(at("images and documents go in a user message"), "")
		}
		md := p.Media
		switch {
		case (len(md.Data) == 0) == (md.URL == ""):
			return badRequest(at("media sets %s: set exactly one of Data and URL", map[bool]string{true: "neither Data nor URL", false: "both Data and URL"}[md.URL == ""]), "")
		case len(md.Data) > 0 && md.MediaType == "":
			return badRequest(at("inline media has no MediaType (image/png, application/pdf, …)"), "")
		}
	case p.ToolCall != nil:
		tc := p.ToolCall
		switch {
		case role != RoleAssistant:
			return badRequest(at("a tool call goes in an assistant message (the model made it)"), "")
		case tc.ID == "" || tc.Name == "":
			return badRequest(at("a tool call needs an ID and a Name"), "")
		case len(tc.Arguments) > 0 && !isObject(tc.Arguments):
			return badRequest(at("the tool call's Arguments are not a JSON object"), "call "+tc.ID)
		}
		if _, dup := calls[tc.ID]; dup {
			return badRequest(at("a tool call reuses the ID of an earlier call"), "call "+tc.ID)
		}
		if calls == nil {
			calls = map[string]bool{}
			*callsp = calls
		}
		calls[tc.ID] = false
	case p.ToolResult != nil:
		tr := p.ToolResult
		answered, made := calls[tr.CallID]
		switch {
		case role != RoleUser:
			return badRequest(at("a tool result goes in a user message"), "")
		case !made:
			return badRequest(at("the tool result answers a call no earlier assistant message made"), "call "+tr.CallID)
		case answered:
			return badRequest(at("the tool result answers a call already answered"), "call "+tr.CallID)
		}
		calls[tr.CallID] = true
	}
	return nil
}

// checkTools checks the tools, the tool choice and the response schema.
func (r *Request) checkTools() error {
	for i := range r.Tools {
		t := &r.Tools[i] // by pointer: a Tool is 56 bytes, and each is compared with all before it
		if err := checkToolName(t.Name); err != "" {
			return badRequest(fmt.Sprintf("tool %d: %s", i, err), "tool "+t.Name)
		}
		for j := range i {
			if r.Tools[j].Name == t.Name {
				return badRequest(fmt.Sprintf("tool %d: the name is the name of an earlier tool", i), "tool "+t.Name)
			}
		}
		if len(t.InputSchema) > 0 && !looksObject(t.InputSchema) {
			return badRequest(fmt.Sprintf("tool %d: InputSchema is not a JSON object", i), "tool "+t.Name)
		}
	}
	switch c := r.ToolChoice; {
	case c.Mode > ToolNamed:
		return badRequest(fmt.Sprintf("ToolChoice.Mode %d is not a ToolMode", c.Mode), "")
	case c.Mode == ToolNamed && !hasTool(r.Tools, c.Name):
		return badRequest("ToolChoice names a tool the request does not have", "tool "+c.Name)
	case c.Mode != ToolNamed && c.Name != "":
		return badRequest("ToolChoice sets Name without Mode ToolNamed (use llm.UseTool)", "tool "+c.Name)
	case c.Mode == ToolAny && len(r.Tools) == 0:
		return badRequest("ToolChoice is any but the request has no tools", "")
	}
	if len(r.ResponseSchema) > 0 && !isObject(r.ResponseSchema) {
		return badRequest("ResponseSchema is not a JSON object", "")
	}
	return nil
}

// checkToolName says what is wrong with a tool name; "" when nothing is.
func checkToolName(name string) string {
	if name == "" || len(name) > maxToolName {
		return fmt.Sprintf("a tool name has 1 to %d bytes", maxToolName)
	}
	for i := 0; i < len(name); i++ {
		if !nameByte[name[i]] {
			return "a tool name holds only letters, digits, _ and -"
		}
	}
	return ""
}

// nameByte marks the bytes a tool name may hold.
var nameByte = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	return t
}()

// hasTool reports whether tools has one named name.
func hasTool(tools []Tool, name string) bool {
	for i := range tools {
		if tools[i].Name == name {
			return true
		}
	}
	return false
}

// looksObject reports whether b starts as a JSON object does: the cheap
// check of a tool's InputSchema, which a chain compiles (and a provider
// parses) in full.
func looksObject(b json.RawMessage) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c == '{'
	}
	return false
}

// isObject reports whether b is a JSON object.
func isObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// badRequest is the failure of a request that no provider would take.
func badRequest(msg, detail string) *Error {
	return &Error{Provider: "backstop", Kind: KindBadRequest, Message: msg, Detail: detail}
}
