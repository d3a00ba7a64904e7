package anthropic

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// request is the Messages API request body.
type request struct {
	Model         string        `json:"model"`
	MaxTokens     int           `json:"max_tokens"`
	System        string        `json:"system,omitempty"`
	Messages      []message     `json:"messages"`
	Temperature   *float64      `json:"temperature,omitempty"`
	TopP          *float64      `json:"top_p,omitempty"`
	StopSequences []string      `json:"stop_sequences,omitempty"`
	Tools         []tool        `json:"tools,omitempty"`
	ToolChoice    *toolChoice   `json:"tool_choice,omitempty"`
	OutputConfig  *outputConfig `json:"output_config,omitempty"`
}

// message is one turn. Content is a string for a message of plain text
// (the wire form text-only requests have always had) and a []contentBlock
// for a message with parts.
type message struct {
	Role    llm.Role `json:"role"`
	Content any      `json:"content"`
}

// contentBlock is one block of a message's content array: text, image,
// document, tool_use or tool_result, each setting only its own fields.
type contentBlock struct {
	Type   string  `json:"type"`
	Text   string  `json:"text,omitempty"`
	Source *source `json:"source,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string `json:"tool_use_id,omitempty"`
	Content   string `json:"content,omitempty"`
	IsError   bool   `json:"is_error,omitempty"`
}

// source is where an image or a document comes from: base64 (media_type,
// data), text (media_type text/plain, data: the text itself) or url.
type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// tool is a tool definition (the SDK's ToolParam).
type tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// toolChoice is tool_choice: auto, any, none, or tool with a name.
type toolChoice struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
}

// outputConfig asks for native structured output:
// {"format": {"type": "json_schema", "schema": …}}.
type outputConfig struct {
	Format outputFormat `json:"format"`
}

type outputFormat struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// maxToolID is the longest tool-use id sent as is; the API's pattern is
// ^[a-zA-Z0-9_-]+$.
const maxToolID = 64

// validToolID reports whether the Messages API takes id as a tool_use id.
func validToolID(id string) bool { return wire.IDChars(id, maxToolID) }

// newToolIDs returns the tool-call id translation of one request: an id
// the API would refuse (another provider's "functions.get:0", say) goes out
// as toolu_ and a hash, and comes back as the caller's.
func newToolIDs() wire.ToolIDs {
	return wire.ToolIDs{Valid: validToolID, Prefix: "toolu_"}
}

// newRequest translates req into the Messages API body, translating tool
// ids with ids. It fails only for content the API cannot carry (a document
// type other than PDF or text), with an *llm.Error of KindBadRequest.
func (p *Provider) newRequest(req llm.Request, ids *wire.ToolIDs) (*request, error) {
	r := &request{
		Model:         req.Model,
		MaxTokens:     req.Params.MaxTokens,
		System:        req.System,
		Messages:      make([]message, len(req.Messages)),
		Temperature:   req.Params.Temperature,
		TopP:          req.Params.TopP,
		StopSequences: req.Params.Stop,
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = defaultMaxTokens
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		if len(m.Parts) == 0 {
			r.Messages[i] = message{Role: m.Role, Content: m.Content}
			continue
		}
		blocks, err := p.blocks(m, i, ids)
		if err != nil {
			return nil, err
		}
		r.Messages[i] = message{Role: m.Role, Content: blocks}
	}
	if len(req.Tools) > 0 {
		r.Tools = make([]tool, len(req.Tools))
		for i, t := range req.Tools {
			r.Tools[i] = tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
			if len(t.InputSchema) == 0 {
				r.Tools[i].InputSchema = anthropicwire.EmptySchema
			}
		}
	}
	if len(req.Tools) > 0 || req.ToolChoice.Mode != llm.ToolAuto {
		r.ToolChoice = newToolChoice(req.ToolChoice)
	}
	if len(req.ResponseSchema) > 0 {
		r.OutputConfig = &outputConfig{Format: outputFormat{Type: "json_schema", Schema: req.ResponseSchema}}
	}
	return r, nil
}

// newToolChoice translates c.
func newToolChoice(c llm.ToolChoice) *toolChoice {
	switch c.Mode {
	case llm.ToolNone:
		return &toolChoice{Type: "none"}
	case llm.ToolAny:
		return &toolChoice{Type: "any"}
	case llm.ToolNamed:
		return &toolChoice{Type: "tool", Name: c.Name}
	}
	return &toolChoice{Type: "auto"}
}

// blocks translates message i, m, into its content array: Content first as
// a text block when not empty, then each part in order.
func (p *Provider) blocks(m *llm.Message, i int, ids *wire.ToolIDs) ([]contentBlock, error) {
	n := len(m.Parts)
	if m.Content != "" {
		n++
	}
	out := make([]contentBlock, 0, n)
	if m.Content != "" {
		out = append(out, contentBlock{Type: "text", Text: m.Content})
	}
	for j := range m.Parts {
		pt := &m.Parts[j]
		switch {
		case pt.ToolCall != nil:
			tc := pt.ToolCall
			out = append(out, contentBlock{Type: "tool_use", ID: ids.Out(tc.ID), Name: tc.Name, Input: anthropicwire.Input(tc.Arguments)})
		case pt.ToolResult != nil:
			tr := pt.ToolResult
			out = append(out, contentBlock{Type: "tool_result", ToolUseID: ids.Out(tr.CallID), Content: tr.Content, IsError: tr.IsError})
		case pt.Media != nil:
			b, err := p.media(pt.Media, i, j)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		default:
			out = append(out, contentBlock{Type: "text", Text: pt.Text})
		}
	}
	return out, nil
}

// media translates an image or a document, part j of message i.
func (p *Provider) media(md *llm.Media, i, j int) (contentBlock, error) {
	if !md.IsDocument() {
		if md.URL != "" {
			return contentBlock{Type: "image", Source: &source{Type: "url", URL: md.URL}}, nil
		}
		return contentBlock{Type: "image", Source: &source{Type: "base64", MediaType: md.MediaType,
			Data: base64.StdEncoding.EncodeToString(md.Data)}}, nil
	}
	mt := mediaType(md.MediaType)
	switch {
	case md.URL != "":
		return contentBlock{Type: "document", Source: &source{Type: "url", URL: md.URL}}, nil
	case mt == "application/pdf":
		return contentBlock{Type: "document", Source: &source{Type: "base64", MediaType: mt,
			Data: base64.StdEncoding.EncodeToString(md.Data)}}, nil
	case strings.HasPrefix(mt, "text/"):
		// A plain-text source carries the text itself; text/markdown,
		// text/csv and the like travel as the plain text they are.
		return contentBlock{Type: "document", Source: &source{Type: "text", MediaType: "text/plain", Data: string(md.Data)}}, nil
	}
	return contentBlock{}, &llm.Error{Provider: p.ep.Provider, Kind: llm.KindBadRequest,
		Message: fmt.Sprintf("message %d, part %d: Anthropic takes documents as application/pdf or text/plain, not %q; convert the document or send it as text",
			i, j, md.MediaType)}
}

// mediaType returns the media type without its parameters
// ("text/plain; charset=utf-8" -> "text/plain"), lowercased.
func mediaType(mt string) string {
	if k := strings.IndexByte(mt, ';'); k >= 0 {
		mt = mt[:k]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}
