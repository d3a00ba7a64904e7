package genai

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mime"
	"net/url"
	"path"
	"strings"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// call is one request translated for the SDK.
type call struct {
	contents []*gg.Content
	config   *gg.GenerateContentConfig
	// ids names the answer's calls (see answer.toolCall).
	ids wire.CallIDs
}

// sigMark separates a tool-call id from the thought signature it carries
// (see the package documentation).
const sigMark = "~sig~"

// translate turns req into the SDK's contents and config. A request it
// cannot translate is a KindBadRequest error and nothing is sent.
func (p *Provider) translate(req llm.Request) (*call, error) {
	if req.Model == "" {
		return nil, p.badRequest("Request.Model is empty; set the model (gemini-2.5-flash, …)", "")
	}
	cfg := &gg.GenerateContentConfig{
		// One attempt: override whatever retries the client was built with
		// (a request's RetryOptions replace the client's wholesale) and
		// turn off automatic continuation, which resends the request.
		HTTPOptions:           &gg.HTTPOptions{RetryOptions: &gg.HTTPRetryOptions{Attempts: gg.Ptr[int32](1)}},
		AutomaticContinuation: gg.Ptr(false),
	}
	if len(req.Params.Extra) > 0 {
		cfg.HTTPOptions.ExtraBody = req.Params.Extra
	}
	if req.System != "" {
		cfg.SystemInstruction = &gg.Content{Role: gg.RoleUser, Parts: []*gg.Part{{Text: req.System}}}
	}
	if n := req.Params.MaxTokens; n > 0 {
		cfg.MaxOutputTokens = int32(min(n, math.MaxInt32))
	}
	if t := req.Params.Temperature; t != nil {
		cfg.Temperature = gg.Ptr(float32(*t))
	}
	if t := req.Params.TopP; t != nil {
		cfg.TopP = gg.Ptr(float32(*t))
	}
	if len(req.Params.Stop) > 0 {
		cfg.StopSequences = req.Params.Stop
	}
	if len(req.ResponseSchema) > 0 {
		if !json.Valid(req.ResponseSchema) {
			return nil, p.badRequest("Request.ResponseSchema is not valid JSON", "")
		}
		cfg.ResponseMIMEType = "application/json"
		cfg.ResponseJsonSchema = json.RawMessage(req.ResponseSchema)
	}
	if err := p.tools(req, cfg); err != nil {
		return nil, err
	}

	c := &call{config: cfg, contents: make([]*gg.Content, 0, len(req.Messages))}
	names := map[string]string{} // tool-call id -> tool name, for the results
	for i := range req.Messages {
		m := &req.Messages[i]
		at := func(j int) string { return fmt.Sprintf("Messages[%d].Parts[%d]", i, j) }
		content := &gg.Content{Parts: make([]*gg.Part, 0, len(m.Parts)+1)}
		switch m.Role {
		case llm.RoleUser:
			content.Role = gg.RoleUser
		case llm.RoleAssistant:
			content.Role = gg.RoleModel
		default:
			return nil, p.badRequest(fmt.Sprintf("Messages[%d] has role %q; use user or assistant", i, m.Role), "")
		}
		if m.Content != "" {
			content.Parts = append(content.Parts, &gg.Part{Text: m.Content})
		}
		for j, part := range m.Parts {
			switch {
			case part.ToolCall != nil:
				tc := part.ToolCall
				args, err := decodeObject(tc.Arguments)
				if err != nil {
					return nil, p.badRequest(at(j)+": the tool call's Arguments are not a JSON object", "call "+tc.ID)
				}
				id, sig := splitID(tc.ID)
				names[tc.ID] = tc.Name
				content.Parts = append(content.Parts, &gg.Part{
					FunctionCall:     &gg.FunctionCall{ID: id, Name: tc.Name, Args: args},
					ThoughtSignature: sig,
				})
			case part.ToolResult != nil:
				tr := part.ToolResult
				name, ok := names[tr.CallID]
				if !ok {
					return nil, p.badRequest(at(j)+": the tool result answers no tool call of an earlier assistant message (Gemini needs its name)", "call "+tr.CallID)
				}
				id, _ := splitID(tr.CallID)
				resp := map[string]any{"output": tr.Content}
				if tr.IsError {
					resp = map[string]any{"error": tr.Content}
				}
				content.Parts = append(content.Parts, &gg.Part{FunctionResponse: &gg.FunctionResponse{ID: id, Name: name, Response: resp}})
			case part.Media != nil:
				mp, err := p.media(part.Media, at(j))
				if err != nil {
					return nil, err
				}
				content.Parts = append(content.Parts, mp)
			case part.Text != "":
				content.Parts = append(content.Parts, &gg.Part{Text: part.Text})
			}
		}
		if len(content.Parts) == 0 {
			return nil, p.badRequest(fmt.Sprintf("Messages[%d] is empty; Gemini takes no message without parts", i), "")
		}
		c.contents = append(c.contents, content)
	}
	if len(c.contents) == 0 {
		return nil, p.badRequest("Request.Messages is empty", "")
	}
	c.ids = wire.NewCallIDs(req.Messages, nil)
	c.ids.Key = sentID
	return c, nil
}

// tools sets the function declarations and the function-calling mode.
func (p *Provider) tools(req llm.Request, cfg *gg.GenerateContentConfig) error {
	if len(req.Tools) > 0 {
		decls := make([]*gg.FunctionDeclaration, len(req.Tools))
		for i, t := range req.Tools {
			d := &gg.FunctionDeclaration{Name: t.Name, Description: t.Description}
			if len(bytes.TrimSpace(t.InputSchema)) == 0 {
				d.ParametersJsonSchema = json.RawMessage(`{"type":"object","properties":{}}`)
			} else if !json.Valid(t.InputSchema) {
				return p.badRequest(fmt.Sprintf("Tools[%d]: the InputSchema is not valid JSON", i), "tool "+t.Name)
			} else {
				d.ParametersJsonSchema = json.RawMessage(t.InputSchema)
			}
			decls[i] = d
		}
		cfg.Tools = []*gg.Tool{{FunctionDeclarations: decls}}
	}
	var fc *gg.FunctionCallingConfig
	switch req.ToolChoice.Mode {
	case llm.ToolAuto:
	case llm.ToolNone:
		fc = &gg.FunctionCallingConfig{Mode: gg.FunctionCallingConfigModeNone}
	case llm.ToolAny:
		fc = &gg.FunctionCallingConfig{Mode: gg.FunctionCallingConfigModeAny}
	case llm.ToolNamed:
		if req.ToolChoice.Name == "" {
			return p.badRequest("ToolChoice names no tool", "")
		}
		fc = &gg.FunctionCallingConfig{Mode: gg.FunctionCallingConfigModeAny, AllowedFunctionNames: []string{req.ToolChoice.Name}}
	default:
		return p.badRequest(fmt.Sprintf("ToolChoice has unknown mode %d", req.ToolChoice.Mode), "")
	}
	if fc != nil {
		cfg.ToolConfig = &gg.ToolConfig{FunctionCallingConfig: fc}
	}
	return nil
}

// media returns the part for an image or a document: inline bytes as
// inlineData, a URL as fileData.
func (p *Provider) media(m *llm.Media, at string) (*gg.Part, error) {
	switch {
	case len(m.Data) > 0:
		if m.MediaType == "" {
			return nil, p.badRequest(at+": inline media needs a MediaType", "")
		}
		return &gg.Part{InlineData: &gg.Blob{MIMEType: m.MediaType, Data: m.Data}}, nil
	case m.URL != "":
		mt := m.MediaType
		if mt == "" {
			mt = guessType(m.URL)
		}
		return &gg.Part{FileData: &gg.FileData{FileURI: m.URL, MIMEType: mt}}, nil
	}
	return nil, p.badRequest(at+": the media has neither Data nor a URL", "")
}

// guessType guesses an image URL's media type from its extension; "" when
// it has none that names an image (the API then decides).
func guessType(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if t := mime.TypeByExtension(strings.ToLower(path.Ext(u.Path))); strings.HasPrefix(t, "image/") {
		if i := strings.IndexByte(t, ';'); i >= 0 {
			t = t[:i]
		}
		return t
	}
	return ""
}

// decodeObject decodes a JSON object (numbers kept as written); empty
// means an object without members, returned as nil.
func decodeObject(b []byte) (map[string]any, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	if b[0] != '{' {
		return nil, errors.New("not an object")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if d.More() {
		return nil, errors.New("trailing data after the object")
	}
	return m, nil
}

// joinID returns the tool-call id the caller sees for a call Gemini made:
// its id, with the thought signature the call carried appended after
// sigMark (base64url), so that replaying the call hands the signature back.
func joinID(id string, sig []byte) string {
	if len(sig) == 0 {
		return id
	}
	return id + sigMark + base64.RawURLEncoding.EncodeToString(sig)
}

// splitID undoes joinID: the id to send and the thought signature, if the
// id carries one. An id that merely contains sigMark followed by something
// that is not base64url goes out whole.
func splitID(id string) (string, []byte) {
	i := strings.LastIndex(id, sigMark)
	if i < 0 {
		return id, nil
	}
	sig, err := base64.RawURLEncoding.DecodeString(id[i+len(sigMark):])
	if err != nil || len(sig) == 0 {
		return id, nil
	}
	return id[:i], sig
}

// sentID is the id a call's id goes out as (splitID's): two calls whose
// ids differ only by their signatures are one id to Gemini.
func sentID(id string) string {
	id, _ = splitID(id)
	return id
}

// badRequest is a request the adapter cannot send: nothing went out.
func (p *Provider) badRequest(msg, detail string) *llm.Error {
	return p.redact(&llm.Error{Provider: p.name, Kind: llm.KindBadRequest, Message: msg, Detail: p.detail(detail)})
}
