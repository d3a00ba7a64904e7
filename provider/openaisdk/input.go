package openaisdk

import (
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
)

// The translation of a request that Chat Completions and the Responses API
// share: the walk over the conversation, its checks and its errors, the
// tools and the tool choice, the sampling params. Each API supplies the
// constructors of its own params (chat.go, responses.go).

// sampling returns max tokens, temperature and top_p as both APIs take
// them, each unset when the request leaves it unset.
func sampling(pr llm.Params) (maxTokens param.Opt[int64], temperature, topP param.Opt[float64]) {
	if pr.MaxTokens > 0 {
		maxTokens = openai.Int(int64(pr.MaxTokens))
	}
	if t := pr.Temperature; t != nil {
		temperature = openai.Float(*t)
	}
	if t := pr.TopP; t != nil {
		topP = openai.Float(*t)
	}
	return maxTokens, temperature, topP
}

// inputFormat is how one API writes the pieces of a conversation: I is an
// input item (a message, a tool result), C a part of a user message's
// content.
type inputFormat[I, C any] struct {
	// plain is a message of its text alone (a message without parts).
	plain func(role llm.Role, text string) I
	// assistant is an assistant message with parts, as one item or more:
	// its text, unset when empty and there are calls, and its calls.
	assistant func(text param.Opt[string], calls []callParam) []I
	// toolResult is the result of the call callID (as the API knows it).
	toolResult func(callID, output string) I
	// user is a user message of content.
	user func(content []C) I

	text  func(s string) C
	image func(url string) C // a URL or a data: URL
	// documentURL is a document by URL; nil where the API takes none, and
	// noDocumentURL then says why.
	documentURL   func(url string) C
	noDocumentURL string
	// file is a binary document, as a data: URL and a name.
	file func(dataURL, name string) C
}

// callParam is a tool call to replay: its id as the API knows it, its
// name and its arguments ("{}" when empty).
type callParam struct{ id, name, arguments string }

// input appends the conversation msgs to out as f writes it. A message
// whose role is neither user nor assistant, or a part its role cannot
// carry, is a KindBadRequest error.
func input[I, C any](p *Provider, out []I, msgs []llm.Message, ids *wire.ToolIDs, f *inputFormat[I, C]) ([]I, error) {
	docs := 0
	for i := range msgs {
		m := &msgs[i]
		var err error
		switch {
		case m.Role != llm.RoleUser && m.Role != llm.RoleAssistant:
			return nil, p.badRequest(fmt.Sprintf("message %d has role %q; want user or assistant", i, m.Role), nil)
		case len(m.Parts) == 0:
			out = append(out, f.plain(m.Role, m.Content))
		case m.Role == llm.RoleAssistant:
			out, err = inputAssistant(p, out, i, m, ids, f)
		default:
			out, err = inputUser(p, out, i, m, ids, f, &docs)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// inputAssistant appends an assistant message with parts: its text (the
// content and the text parts, omitted when empty and there are tool calls)
// and its tool calls.
func inputAssistant[I, C any](p *Provider, out []I, i int, m *llm.Message, ids *wire.ToolIDs, f *inputFormat[I, C]) ([]I, error) {
	text, calls, bad := openaiwire.AssistantParts(i, m, ids, func(id, name, args string) callParam {
		return callParam{id: id, name: name, arguments: args}
	}, p.badPart)
	if bad != nil {
		return nil, bad
	}
	var content param.Opt[string]
	if text != "" || len(calls) == 0 {
		content = openai.String(text)
	}
	return append(out, f.assistant(content, calls)...), nil
}

// inputUser appends a user message with parts: one item per tool result
// first, then a message of the other parts, if any: text as text, images
// (a URL or a data: URL), documents by URL where the API takes them, text
// documents as text, PDFs and other binary documents as files (a data:
// URL, named document-1.pdf, …).
func inputUser[I, C any](p *Provider, out []I, i int, m *llm.Message, ids *wire.ToolIDs, f *inputFormat[I, C], docs *int) ([]I, error) {
	var content []C
	if m.Content != "" {
		content = append(content, f.text(m.Content))
	}
	for j := range m.Parts {
		part := &m.Parts[j]
		switch md := part.Media; {
		case part.ToolResult != nil:
			out = append(out, f.toolResult(ids.Out(part.ToolResult.CallID), openaiwire.ToolResultText(part.ToolResult)))
		case part.ToolCall != nil:
			return nil, p.badPart(i, j, m.Role, "a tool call goes in an assistant message")
		case md == nil:
			content = append(content, f.text(part.Text))
		case !md.IsDocument():
			u := md.URL
			if u == "" {
				u = dataURL(md.MediaType, md.Data)
			}
			content = append(content, f.image(u))
		case md.URL != "" && f.documentURL == nil:
			return nil, p.badPart(i, j, m.Role, f.noDocumentURL)
		case md.URL != "":
			content = append(content, f.documentURL(md.URL))
		case strings.HasPrefix(md.MediaType, "text/"):
			content = append(content, f.text(string(md.Data)))
		default:
			content = append(content, f.file(dataURL(md.MediaType, md.Data), docName(docs, md.MediaType)))
		}
	}
	if len(content) > 0 {
		out = append(out, f.user(content))
	}
	return out, nil
}

// docName names the next inline document of a request: document-1.pdf, …
func docName(docs *int, mediaType string) string {
	*docs++
	ext := "pdf"
	if mediaType != "application/pdf" {
		ext = "bin"
	}
	return fmt.Sprintf("document-%d.%s", *docs, ext)
}

// toolFormat is how one API writes tools (T) and the tool choice (C).
type toolFormat[T, C any] struct {
	// tool is a function tool; description is unset when empty.
	tool func(name string, description param.Opt[string], schema map[string]any) T
	// mode is the choice "none" or "required".
	mode func(mode string) C
	// named is the choice of the tool name.
	named func(name string) C
}

// tools translates the request's tools and its tool choice (left unset,
// auto, for ToolAuto and when there are no tools). A tool whose
// InputSchema is not a JSON object is a KindBadRequest error.
func tools[T, C any](p *Provider, req llm.Request, f toolFormat[T, C]) ([]T, C, error) {
	var choice C
	if len(req.Tools) == 0 {
		return nil, choice, nil
	}
	out := make([]T, len(req.Tools))
	for i, t := range req.Tools {
		schema, err := toolSchema(t)
		if err != nil {
			return nil, choice, p.badRequest(fmt.Sprintf("tool %q: its InputSchema is not a JSON object (%v)", t.Name, err), err)
		}
		var description param.Opt[string]
		if t.Description != "" {
			description = openai.String(t.Description)
		}
		out[i] = f.tool(t.Name, description, schema)
	}
	switch req.ToolChoice.Mode {
	case llm.ToolNone:
		choice = f.mode("none")
	case llm.ToolAny:
		choice = f.mode("required")
	case llm.ToolNamed:
		choice = f.named(req.ToolChoice.Name)
	}
	return out, choice, nil
}
