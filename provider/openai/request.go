package openai

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// request is the Chat Completions request body. Its shapes are those of
// openai-go v3.98.0 (ChatCompletionNewParams and the message, content part,
// tool and response format params it holds).
type request struct {
	Model               string          `json:"model"`
	Messages            []message       `json:"messages"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	Tools               []tool          `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"`
	ResponseFormat      *responseFormat `json:"response_format,omitempty"`
}

// message is one message of the body: system, user, assistant or tool.
type message struct {
	Role llm.Role `json:"role"`
	// Content is a string (the form every text-only message keeps), a
	// []contentPart (a user message with images or documents), or nil: an
	// assistant message made only of tool calls, whose content is omitted
	// as openai-go omits it.
	Content    any            `json:"content,omitempty"`
	ToolCalls  []toolCallWire `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// contentPart is one part of a user message's content array: text,
// image_url or file.
type contentPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	File     *filePart `json:"file,omitempty"`
}

// imageURL is an image by URL, or inline as a data: URL.
type imageURL struct {
	URL string `json:"url"`
}

// filePart is an inline file (a PDF), as a data: URL with a file name.
// Chat Completions has no field for a file by URL: only file_data (inline)
// and file_id (an uploaded file).
type filePart struct {
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
}

// toolCallWire is a call in an assistant message's tool_calls.
type toolCallWire struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

// functionCall is the function of a tool call; Arguments is the JSON text
// of the arguments, as a string.
type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// tool is a function tool the model may call.
type tool struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

// functionDef defines a function tool.
type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// namedChoice is the tool_choice that makes the model call one function.
type namedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// responseFormat asks for native structured output.
type responseFormat struct {
	Type       string     `json:"type"`
	JSONSchema jsonSchema `json:"json_schema"`
}

// jsonSchema is the schema of a json_schema response format.
type jsonSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// The roles the body has beyond llm's.
const (
	// roleSystem carries Request.System as the first message.
	roleSystem llm.Role = "system"
	// roleTool carries one tool result.
	roleTool llm.Role = "tool"
)

// schemaName is the name every response format is sent with.
const schemaName = "response"

// emptyParameters is the parameters of a tool without an InputSchema: an
// object with any properties.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// newRequest translates req into the body, tool-call ids through ids. A
// part Chat Completions cannot carry (a document by URL) is a
// KindBadRequest *llm.Error: nothing is sent.
func (p *Provider) newRequest(req llm.Request, ids *wire.ToolIDs) (*request, error) {
	r := &request{
		Model:       req.Model,
		Temperature: req.Params.Temperature,
		TopP:        req.Params.TopP,
		Stop:        req.Params.Stop,
	}
	if p.legacy {
		r.MaxTokens = req.Params.MaxTokens
	} else {
		r.MaxCompletionTokens = req.Params.MaxTokens
	}
	n := len(req.Messages)
	if req.System != "" {
		n++
	}
	r.Messages = make([]message, 0, n)
	if req.System != "" {
		r.Messages = append(r.Messages, message{Role: roleSystem, Content: req.System})
	}
	docs := 0 // inline files so far, to name them
	for i := range req.Messages {
		m := &req.Messages[i]
		if len(m.Parts) == 0 {
			r.Messages = append(r.Messages, message{Role: m.Role, Content: m.Content})
			continue
		}
		var err error
		if m.Role == llm.RoleAssistant {
			r.Messages, err = p.assistantMessage(r.Messages, i, m, ids)
		} else {
			r.Messages, err = p.userMessages(r.Messages, i, m, ids, &docs)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(req.Tools) > 0 {
		r.Tools = make([]tool, len(req.Tools))
		for i, t := range req.Tools {
			params := t.InputSchema
			if len(params) == 0 {
				params = emptyParameters
			}
			r.Tools[i] = tool{Type: "function", Function: functionDef{Name: t.Name, Description: t.Description, Parameters: params}}
		}
		r.ToolChoice = toolChoice(req.ToolChoice)
	}
	if len(req.ResponseSchema) > 0 {
		r.ResponseFormat = &responseFormat{Type: "json_schema",
			JSONSchema: jsonSchema{Name: schemaName, Schema: req.ResponseSchema, Strict: true}}
	}
	return r, nil
}

// toolChoice returns the tool_choice of c: nil (omitted) for auto, the
// API's default when tools are present.
func toolChoice(c llm.ToolChoice) any {
	switch c.Mode {
	case llm.ToolNone:
		return "none"
	case llm.ToolAny:
		return "required"
	case llm.ToolNamed:
		nc := &namedChoice{Type: "function"}
		nc.Function.Name = c.Name
		return nc
	}
	return nil
}

// assistantMessage appends message i, an assistant message with parts: its
// text (Content and text parts) as the content string, omitted when empty
// and there are tool calls, and its tool calls.
func (p *Provider) assistantMessage(out []message, i int, m *llm.Message, ids *wire.ToolIDs) ([]message, error) {
	text, calls, bad := openaiwire.AssistantParts(i, m, ids, func(id, name, args string) toolCallWire {
		return toolCallWire{ID: id, Type: "function", Function: functionCall{Name: name, Arguments: args}}
	}, p.badPart)
	if bad != nil {
		return nil, bad
	}
	msg := message{Role: llm.RoleAssistant, ToolCalls: calls}
	if text != "" || len(calls) == 0 {
		msg.Content = text
	}
	return append(out, msg), nil
}

// userMessages appends message i, a user message with parts: one tool
// message per tool result first (they answer the assistant message before
// it), then a user message of the other parts, if any, as a content array.
func (p *Provider) userMessages(out []message, i int, m *llm.Message, ids *wire.ToolIDs, docs *int) ([]message, error) {
	var content []contentPart
	if m.Content != "" {
		content = append(content, contentPart{Type: "text", Text: m.Content})
	}
	for j := range m.Parts {
		part := &m.Parts[j]
		switch {
		case part.ToolResult != nil:
			out = append(out, message{Role: roleTool, Content: openaiwire.ToolResultText(part.ToolResult), ToolCallID: ids.Out(part.ToolResult.CallID)})
		case part.Media != nil:
			cp, err := p.mediaPart(i, j, part.Media, docs)
			if err != nil {
				return nil, err
			}
			content = append(content, cp)
		case part.ToolCall != nil:
			return nil, p.badPart(i, j, m.Role, "a tool call goes in an assistant message")
		default:
			content = append(content, contentPart{Type: "text", Text: part.Text})
		}
	}
	if len(content) > 0 {
		out = append(out, message{Role: llm.RoleUser, Content: content})
	}
	return out, nil
}

// mediaPart returns the content part of part j of message i: an image as
// image_url (its URL, or a data: URL of its bytes), a PDF as a file with a
// data: URL, a text/… document as a text part. Any other inline document
// goes as a file of its media type, for the API to accept or refuse; a
// document by URL cannot be sent.
func (p *Provider) mediaPart(i, j int, md *llm.Media, docs *int) (contentPart, error) {
	switch {
	case !md.IsDocument() && md.URL != "":
		return contentPart{Type: "image_url", ImageURL: &imageURL{URL: md.URL}}, nil
	case !md.IsDocument():
		return contentPart{Type: "image_url", ImageURL: &imageURL{URL: dataURL(md.MediaType, md.Data)}}, nil
	case md.URL != "":
		return contentPart{}, p.badPart(i, j, llm.RoleUser,
			"Chat Completions takes no document by URL (a file part has file_data and file_id, no URL): send its bytes")
	case strings.HasPrefix(md.MediaType, "text/"):
		return contentPart{Type: "text", Text: string(md.Data)}, nil
	}
	*docs++
	ext := "pdf"
	if md.MediaType != "application/pdf" {
		ext = "bin"
	}
	return contentPart{Type: "file", File: &filePart{FileData: dataURL(md.MediaType, md.Data),
		Filename: fmt.Sprintf("document-%d.%s", *docs, ext)}}, nil
}

// dataURL returns data as a data: URL of mediaType, base64-encoded.
func dataURL(mediaType string, data []byte) string {
	prefix := "data:" + mediaType + ";base64,"
	b := make([]byte, len(prefix)+base64.StdEncoding.EncodedLen(len(data)))
	copy(b, prefix)
	base64.StdEncoding.Encode(b[len(prefix):], data)
	return string(b)
}

// badPart is the failure of part j of message i, which the body cannot
// carry: a KindBadRequest *llm.Error, as llm.Request.Validate reports.
func (p *Provider) badPart(i, j int, role llm.Role, why string) *llm.Error {
	return &llm.Error{Provider: p.ep.Provider, Kind: llm.KindBadRequest,
		Message: fmt.Sprintf("message %d (%s), part %d: %s", i, role, j, why)}
}
