package anthropicsdk

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/param"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// params translates req into the SDK's MessageNewParams and the request
// options that carry what the params have no field for in this SDK version
// (temperature, top_p) and Params.Extra. It fails only for what cannot be
// sent (a document type the API does not take, a role it does not know, a
// schema or an Extra value that is not JSON), with an *llm.Error of
// KindBadRequest, before anything is sent.
func (c *call) params(req llm.Request) (anthropic.MessageNewParams, []option.RequestOption, error) {
	ps := anthropic.MessageNewParams{
		Model:         anthropic.Model(req.Model),
		MaxTokens:     int64(req.Params.MaxTokens),
		Messages:      make([]anthropic.MessageParam, len(req.Messages)),
		StopSequences: req.Params.Stop,
	}
	if ps.MaxTokens == 0 {
		ps.MaxTokens = DefaultMaxTokens
	}
	if req.System != "" {
		ps.System = []anthropic.TextBlockParam{{Text: req.System}}
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		blocks, err := c.blocks(m, i)
		if err != nil {
			return ps, nil, err
		}
		switch m.Role {
		case llm.RoleUser:
			ps.Messages[i] = anthropic.MessageParam{OfUser: &anthropic.UserMessageParam{Content: blocks}}
		case llm.RoleAssistant:
			ps.Messages[i] = anthropic.MessageParam{OfAssistant: &anthropic.AssistantMessageParam{Content: blocks}}
		default:
			return ps, nil, c.badRequest(fmt.Sprintf("message %d has role %q; the Messages API takes user and assistant (the system prompt goes in Request.System)", i, m.Role), nil)
		}
	}
	c.calls = wire.NewCallIDs(req.Messages, &c.ids)
	if len(req.Tools) > 0 {
		ps.Tools = make([]anthropic.ToolUnionParam, len(req.Tools))
		for i, t := range req.Tools {
			schema := t.InputSchema
			if len(schema) == 0 {
				schema = anthropicwire.EmptySchema
			}
			if !json.Valid(schema) {
				return ps, nil, c.badRequest(fmt.Sprintf("tool %d (%s): InputSchema is not JSON", i, t.Name), nil)
			}
			tp := &anthropic.ToolParam{Name: t.Name, InputSchema: param.Override[anthropic.ToolInputSchemaParam](schema)}
			if t.Description != "" {
				tp.Description = param.NewOpt(t.Description)
			}
			ps.Tools[i] = anthropic.ToolUnionParam{OfTool: tp}
		}
	}
	if len(req.Tools) > 0 || req.ToolChoice.Mode != llm.ToolAuto {
		ps.ToolChoice = toolChoice(req.ToolChoice)
	}
	if len(req.ResponseSchema) > 0 {
		if !json.Valid(req.ResponseSchema) {
			return ps, nil, c.badRequest("ResponseSchema is not JSON", nil)
		}
		format := make([]byte, 0, len(req.ResponseSchema)+36)
		format = append(format, `{"type":"json_schema","schema":`...)
		format = append(format, req.ResponseSchema...)
		format = append(format, '}')
		ps.OutputConfig = anthropic.OutputConfigParam{Format: param.Override[anthropic.JSONOutputFormatParam](json.RawMessage(format))}
	}
	var opts []option.RequestOption
	if n := 3 + len(req.Params.Extra); req.Params.Temperature != nil || req.Params.TopP != nil || len(req.Params.Extra) > 0 {
		opts = make([]option.RequestOption, 0, n+3)
	} else {
		opts = make([]option.RequestOption, 0, 3)
	}
	// This SDK version's params have no temperature or top_p: they are
	// set in the body as the native adapter sends them.
	if t := req.Params.Temperature; t != nil {
		opts = append(opts, option.WithJSONSet("temperature", *t))
	}
	if t := req.Params.TopP; t != nil {
		opts = append(opts, option.WithJSONSet("top_p", *t))
	}
	for k, v := range req.Params.Extra {
		raw, err := json.Marshal(v)
		if err != nil {
			return ps, nil, c.badRequest(fmt.Sprintf("cannot encode the request body: Params.Extra[%q]: %v", k, err), err)
		}
		// A key is a top-level field, never an sjson path.
		opts = append(opts, option.WithJSONSet(param.EscapeSJSONKey(k), json.RawMessage(raw)))
	}
	return ps, opts, nil
}

// badRequest is the error for a request that cannot be sent.
func (c *call) badRequest(msg string, err error) *llm.Error {
	return c.redact(&llm.Error{Provider: c.p.ep.Provider, Kind: llm.KindBadRequest, Message: msg, Err: err})
}

// toolChoice translates ch.
func toolChoice(ch llm.ToolChoice) anthropic.ToolChoiceUnionParam {
	switch ch.Mode {
	case llm.ToolNone:
		return anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	case llm.ToolAny:
		return anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{}}
	case llm.ToolNamed:
		return anthropic.ToolChoiceParamOfTool(ch.Name)
	}
	return anthropic.ToolChoiceUnionParam{OfAuto: &anthropic.ToolChoiceAutoParam{}}
}

// blocks translates message i, m, into its content blocks: Content first
// as a text block when not empty (or when there are no parts), then each
// part in order, tool-call ids translated as the native adapter
// translates them.
func (c *call) blocks(m *llm.Message, i int) ([]anthropic.ContentBlockParamUnion, error) {
	n := len(m.Parts)
	if m.Content != "" || n == 0 {
		n++
	}
	out := make([]anthropic.ContentBlockParamUnion, 0, n)
	if m.Content != "" || len(m.Parts) == 0 {
		out = append(out, anthropic.NewTextBlock(m.Content))
	}
	for j := range m.Parts {
		pt := &m.Parts[j]
		switch {
		case pt.ToolCall != nil:
			tc := pt.ToolCall
			input := anthropicwire.Input(tc.Arguments)
			if !json.Valid(input) {
				return nil, c.badRequest(fmt.Sprintf("message %d, part %d: the arguments of tool call %s are not JSON", i, j, tc.Name), nil)
			}
			out = append(out, anthropic.NewToolUseBlock(c.ids.Out(tc.ID), input, tc.Name))
		case pt.ToolResult != nil:
			tr := pt.ToolResult
			b := &anthropic.ToolResultBlockParam{ToolUseID: c.ids.Out(tr.CallID)}
			if tr.Content != "" {
				b.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: tr.Content}}}
			}
			if tr.IsError {
				b.IsError = param.NewOpt(true)
			}
			out = append(out, anthropic.ContentBlockParamUnion{OfToolResult: b})
		case pt.Media != nil:
			b, err := c.media(pt.Media, i, j)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		default:
			out = append(out, anthropic.NewTextBlock(pt.Text))
		}
	}
	return out, nil
}

// media translates an image or a document, part j of message i, as the
// native adapter does.
func (c *call) media(md *llm.Media, i, j int) (anthropic.ContentBlockParamUnion, error) {
	if !md.IsDocument() {
		if md.URL != "" {
			return anthropic.NewImageBlock(anthropic.URLImageSourceParam{URL: md.URL}), nil
		}
		return anthropic.NewImageBlockBase64(md.MediaType, base64.StdEncoding.EncodeToString(md.Data)), nil
	}
	mt := mediaType(md.MediaType)
	switch {
	case md.URL != "":
		return anthropic.NewDocumentBlock(anthropic.URLPDFSourceParam{URL: md.URL}), nil
	case mt == "application/pdf":
		return anthropic.NewDocumentBlock(anthropic.Base64PDFSourceParam{Data: base64.StdEncoding.EncodeToString(md.Data)}), nil
	case strings.HasPrefix(mt, "text/"):
		// A plain-text source carries the text itself; text/markdown,
		// text/csv and the like travel as the plain text they are.
		return anthropic.NewDocumentBlock(anthropic.PlainTextSourceParam{Data: string(md.Data)}), nil
	}
	return anthropic.ContentBlockParamUnion{}, c.badRequest(fmt.Sprintf(
		"message %d, part %d: Anthropic takes documents as application/pdf or text/plain, not %q; convert the document or send it as text",
		i, j, md.MediaType), nil)
}

// mediaType returns the media type without its parameters, lowercased.
func mediaType(mt string) string {
	if k := strings.IndexByte(mt, ';'); k >= 0 {
		mt = mt[:k]
	}
	return strings.ToLower(strings.TrimSpace(mt))
}
