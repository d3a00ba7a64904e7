package openaisdk

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// responsesParams translates req into Responses API params: System as
// instructions; each message as an input message, a user message's tool
// results as function_call_output items before it and an assistant
// message's tool calls as function_call items after its text; tools as
// function tools with strict false (the API's default is true, which
// would refuse schemas Chat Completions takes); tool_choice; text.format
// json_schema strict from ResponseSchema; max_output_tokens, temperature
// and top_p. The Responses API has no stop sequences: a request with
// Params.Stop is a KindBadRequest error, nothing sent.
func (p *Provider) responsesParams(req llm.Request, ids *wire.ToolIDs) (responses.ResponseNewParams, error) {
	params := responses.ResponseNewParams{Model: shared.ResponsesModel(req.Model)}
	if len(req.Params.Stop) > 0 {
		return params, p.badRequest("the Responses API takes no stop sequences (Params.Stop): use the Chat Completions API (Config.API \"chat\")", nil)
	}
	if req.System != "" {
		params.Instructions = openai.String(req.System)
	}
	params.MaxOutputTokens, params.Temperature, params.TopP = sampling(req.Params)
	items, err := input(p, make(responses.ResponseInputParam, 0, len(req.Messages)), req.Messages, ids, &responsesInput)
	if err != nil {
		return params, err
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
	params.Tools, params.ToolChoice, err = tools(p, req, responsesTools)
	if err != nil {
		return params, err
	}
	if len(req.ResponseSchema) > 0 {
		schema, err := jsonObject(req.ResponseSchema)
		if err != nil {
			return params, p.badRequest(fmt.Sprintf("the response schema is not a JSON object (%v)", err), err)
		}
		params.Text.Format.OfJSONSchema = &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: schemaName, Schema: schema, Strict: openai.Bool(true)}
	}
	return params, nil
}

// responsesTools writes function tools, strict false, and tool_choice.
var responsesTools = toolFormat[responses.ToolUnionParam, responses.ResponseNewParamsToolChoiceUnion]{
	tool: func(name string, description param.Opt[string], schema map[string]any) responses.ToolUnionParam {
		return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{Name: name, Description: description,
			Parameters: schema, Strict: openai.Bool(false)}}
	},
	mode: func(mode string) responses.ResponseNewParamsToolChoiceUnion {
		return responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptions(mode))}
	},
	named: func(name string) responses.ResponseNewParamsToolChoiceUnion {
		return responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: name}}
	},
}

// easyMessage is a message of plain text.
func easyMessage(role llm.Role, text string) responses.ResponseInputItemUnionParam {
	r := responses.EasyInputMessageRoleUser
	if role == llm.RoleAssistant {
		r = responses.EasyInputMessageRoleAssistant
	}
	return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{Role: r,
		Content: responses.EasyInputMessageContentUnionParam{OfString: openai.String(text)}}}
}

// responsesInput writes a conversation as Responses API input items: an
// assistant message's text as a message, then each tool call as a
// function_call item; a user message's tool results as
// function_call_output items, its other parts as a message of input_text,
// input_image (detail auto) and input_file (file_data, or file_url for a
// document by URL).
var responsesInput = inputFormat[responses.ResponseInputItemUnionParam, responses.ResponseInputContentUnionParam]{
	plain: easyMessage,
	assistant: func(text param.Opt[string], calls []callParam) []responses.ResponseInputItemUnionParam {
		var out []responses.ResponseInputItemUnionParam
		if text.Valid() {
			out = append(out, easyMessage(llm.RoleAssistant, text.Value))
		}
		for _, c := range calls {
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
				CallID: c.id, Name: c.name, Arguments: c.arguments}})
		}
		return out
	},
	toolResult: func(callID, output string) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
			CallID: openai.String(callID),
			Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(output)}}}
	},
	user: func(content []responses.ResponseInputContentUnionParam) responses.ResponseInputItemUnionParam {
		return responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
			Role: responses.EasyInputMessageRoleUser, Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: content}}}
	},
	text: func(s string) responses.ResponseInputContentUnionParam {
		return responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: s}}
	},
	image: func(url string) responses.ResponseInputContentUnionParam {
		return responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
			ImageURL: openai.String(url), Detail: responses.ResponseInputImageDetailAuto}}
	},
	documentURL: func(url string) responses.ResponseInputContentUnionParam {
		return responses.ResponseInputContentUnionParam{OfInputFile: &responses.ResponseInputFileParam{FileURL: openai.String(url)}}
	},
	file: func(dataURL, name string) responses.ResponseInputContentUnionParam {
		return responses.ResponseInputContentUnionParam{OfInputFile: &responses.ResponseInputFileParam{
			FileData: openai.String(dataURL), Filename: openai.String(name)}}
	},
}

// completeResponses is Complete on the Responses API.
func (a *attempt) completeResponses(ctx context.Context, req llm.Request, ids *wire.ToolIDs) (*llm.Response, error) {
	params, err := a.p.responsesParams(req, ids)
	if err != nil {
		return nil, err
	}
	r, rp, err := send(ctx, a, req.Params.Extra, params, a.p.client.Responses.New)
	if err != nil {
		return nil, err
	}
	calls := wire.NewCallIDs(req.Messages, ids)
	return a.responsesAnswer(r, rp, &calls)
}

// responsesAnswer turns a response into the answer: the text of its
// output messages, its function calls (named by ids: see wire.CallIDs),
// the finish (see finish), or the error it stands for (a failed response,
// a refusal, a content filter).
func (a *attempt) responsesAnswer(r *responses.Response, rp classify.Reply, ids *wire.CallIDs) (*llm.Response, error) {
	if r == nil || r.ID == "" && len(r.Output) == 0 {
		var body []byte
		if r != nil {
			body = []byte(r.RawJSON())
		}
		return nil, a.bodyError(withBody(rp, body), "no response object", nil)
	}
	if r.Status == responses.ResponseStatusFailed || r.Error.Code != "" {
		return nil, a.responseFailed(r, rp)
	}
	var text, refusal strings.Builder
	var calls []llm.ToolCall
	for i := range r.Output {
		item := &r.Output[i]
		switch item.Type {
		case "message":
			for _, c := range item.Content {
				switch c.Type {
				case "output_text":
					text.WriteString(c.Text)
				case "refusal":
					refusal.WriteString(c.Refusal)
				}
			}
		case "function_call":
			calls = openaiwire.AppendCall(calls, ids, item.CallID, item.Name,
				rawArguments(item.Arguments.OfString, item.Arguments.JSON.OfString.Raw()))
		}
	}
	reason, fin := finish(r, len(calls) > 0)
	if f := a.withheld(rp, reason, refusal.String()); f != nil {
		return nil, f
	}
	return a.x.Clean(&llm.Response{
		Text:         text.String(),
		Model:        string(r.Model),
		ID:           r.ID,
		RequestID:    classify.VendorOpenAI.RequestID(rp.Header),
		FinishReason: reason,
		Finish:       fin,
		ToolCalls:    calls,
		Usage:        responseUsage(&r.Usage),
		RateLimit:    classify.VendorOpenAI.RateLimit(rp.Header, rp.Received),
	}), nil
}

// finish returns the finish reason of a response, which has none as such:
// the reason an incomplete response gives (max_output_tokens, which is
// FinishLength; content_filter) or its status (completed: FinishStop, or
// FinishToolUse when it holds function calls).
func finish(r *responses.Response, calls bool) (string, llm.Finish) {
	reason := string(r.Status)
	if r.IncompleteDetails.Reason != "" {
		reason = r.IncompleteDetails.Reason
	}
	switch {
	case reason == "max_output_tokens":
		return reason, llm.FinishLength
	case reason == "completed" && calls:
		return reason, llm.FinishToolUse
	case reason == "completed":
		return reason, llm.FinishStop
	}
	return reason, classify.FinishOf(reason)
}

// responseFailed classifies a failed response by its error code, with the
// status of the reply that carried it (200).
func (a *attempt) responseFailed(r *responses.Response, rp classify.Reply) *llm.Error {
	f := withBody(rp, []byte(r.Error.RawJSON()))
	f.Code, f.Type, f.Message = string(r.Error.Code), r.Error.Type, r.Error.Message
	return a.classified(f, "", nil)
}

// streamResponses is Stream on the Responses API.
func (a *attempt) streamResponses(ctx context.Context, req llm.Request, ids *wire.ToolIDs) (llm.Stream, error) {
	params, err := a.p.responsesParams(req, ids)
	if err != nil {
		return nil, err
	}
	calls := wire.NewCallIDs(req.Messages, ids)
	s, sdk, err := openStream(ctx, a, req.Params.Extra, params, a.p.client.Responses.NewStreaming,
		func(r *responses.Response, rp classify.Reply) (*llm.Response, error) {
			return a.responsesAnswer(r, rp, &calls)
		})
	if err != nil {
		return nil, err
	}
	if sdk != nil {
		s.step = (&responseEvents{s: s, sdk: sdk, ids: &calls, calls: map[string]*pendingCall{}}).step
	}
	return s, nil
}

// responseEvents reads a Responses API stream.
type responseEvents struct {
	s     *stream
	sdk   *ssestream.Stream[responses.ResponseStreamEventUnion]
	ids   *wire.CallIDs           // names the calls
	calls map[string]*pendingCall // function calls being assembled, by item id
}

// step reads one event: the text of response.output_text.delta; a
// function call's arguments from response.function_call_arguments.delta,
// the call made ready at response.output_item.done; the end at
// response.completed or response.incomplete; the failure at
// response.failed or an error event.
func (e *responseEvents) step() (string, bool, error) {
	s := e.s
	if !e.sdk.Next() {
		if err := e.sdk.Err(); err != nil || s.a.x.Failure() != nil {
			return "", false, s.eventError(err)
		}
		return "", false, s.cut() // no response.completed
	}
	ev := e.sdk.Current()
	switch ev.Type {
	case "response.created", "response.in_progress":
		e.meta(&ev.Response)
	case "response.output_text.delta":
		return ev.Delta, false, nil
	case "response.refusal.delta":
		s.refuse(ev.Delta)
	case "response.output_item.added":
		if ev.Item.Type == "function_call" {
			pc := &pendingCall{id: ev.Item.CallID, name: ev.Item.Name}
			pc.args.WriteString(ev.Item.Arguments.OfString)
			e.calls[ev.Item.ID] = pc
			if err := s.growCalls(len(pc.id) + len(pc.name) + pc.args.Len() + 64); err != nil {
				return "", false, err
			}
		}
	case "response.function_call_arguments.delta":
		if pc := e.calls[ev.ItemID]; pc != nil {
			if err := s.growCalls(len(ev.Delta)); err != nil {
				return "", false, err
			}
			pc.args.WriteString(ev.Delta)
		}
	case "response.output_item.done":
		if ev.Item.Type == "function_call" {
			pc := e.calls[ev.Item.ID]
			delete(e.calls, ev.Item.ID)
			id, name, args := ev.Item.CallID, ev.Item.Name, rawArguments(ev.Item.Arguments.OfString, ev.Item.Arguments.JSON.OfString.Raw())
			if pc != nil {
				id, name = cmp.Or(id, pc.id), cmp.Or(name, pc.name)
				if args == "" {
					args = pc.args.String()
				}
			}
			s.ready = openaiwire.AppendCall(s.ready, e.ids, id, name, args)
		}
	case "response.completed", "response.incomplete":
		r := &ev.Response
		e.meta(r)
		s.res.Usage = responseUsage(&r.Usage)
		s.res.FinishReason, s.res.Finish = finish(r, len(s.delivered)+len(s.ready) > 0)
		if f := s.withheld(); f != nil {
			return "", false, f
		}
		return "", true, nil
	case "response.failed":
		e.meta(&ev.Response)
		return "", false, s.a.responseFailed(&ev.Response, s.rp)
	case "error":
		r := withBody(s.rp, []byte(ev.RawJSON()))
		r.Code, r.Message = ev.Code, ev.Message
		return "", false, s.a.classified(r, "", nil)
	}
	return "", false, nil
}

// meta records the id and the model of a response event.
func (e *responseEvents) meta(r *responses.Response) {
	if r.ID != "" {
		e.s.res.ID = r.ID
	}
	if r.Model != "" {
		e.s.res.Model = string(r.Model)
	}
}

// responseUsage is a Responses API usage as the caller reads it: the
// cached input tokens (input_tokens_details.cached_tokens) are counted
// within input_tokens, and apart as the cache reads.
func responseUsage(u *responses.ResponseUsage) llm.Usage {
	return llm.Usage{InputTokens: int(u.InputTokens), OutputTokens: int(u.OutputTokens),
		CacheReadTokens: int(u.InputTokensDetails.CachedTokens)}
}
