package openaisdk

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/shared"
)

// chatParams translates req into Chat Completions params, as the native
// adapter builds its body.
func (p *Provider) chatParams(req llm.Request, ids *wire.ToolIDs) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(req.Model)}
	params.MaxCompletionTokens, params.Temperature, params.TopP = sampling(req.Params)
	if len(req.Params.Stop) > 0 {
		params.Stop = openai.ChatCompletionNewParamsStopUnion{OfStringArray: req.Params.Stop}
	}
	msgs := make([]openai.ChatCompletionMessageParamUnion, 0, len(req.Messages)+1)
	if req.System != "" {
		msgs = append(msgs, openai.ChatCompletionMessageParamUnion{OfSystem: &openai.ChatCompletionSystemMessageParam{
			Content: openai.ChatCompletionSystemMessageParamContentUnion{OfString: openai.String(req.System)}}})
	}
	msgs, err := input(p, msgs, req.Messages, ids, &chatInput)
	if err != nil {
		return params, err
	}
	params.Messages = msgs
	params.Tools, params.ToolChoice, err = tools(p, req, chatTools)
	if err != nil {
		return params, err
	}
	if len(req.ResponseSchema) > 0 {
		if !json.Valid(req.ResponseSchema) {
			return params, p.badRequest("the response schema is not valid JSON", nil)
		}
		params.ResponseFormat.OfJSONSchema = &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: schemaName,
				Schema: json.RawMessage(req.ResponseSchema), Strict: openai.Bool(true)}}
	}
	return params, nil
}

// chatTools writes function tools and tool_choice.
var chatTools = toolFormat[openai.ChatCompletionToolUnionParam, openai.ChatCompletionToolChoiceOptionUnionParam]{
	tool: func(name string, description param.Opt[string], schema map[string]any) openai.ChatCompletionToolUnionParam {
		return openai.ChatCompletionToolUnionParam{OfFunction: &openai.ChatCompletionFunctionToolParam{
			Function: shared.FunctionDefinitionParam{Name: name, Description: description, Parameters: schema}}}
	},
	mode: func(mode string) openai.ChatCompletionToolChoiceOptionUnionParam {
		return openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String(mode)}
	},
	named: func(name string) openai.ChatCompletionToolChoiceOptionUnionParam {
		return openai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &openai.ChatCompletionNamedToolChoiceParam{
			Function: openai.ChatCompletionNamedToolChoiceFunctionParam{Name: name}}}
	},
}

// emptyParameters is the parameters of a tool without an InputSchema: an
// object with any properties.
var emptyParameters = json.RawMessage(`{"type":"object","properties":{}}`)

// toolSchema returns a tool's parameters as the SDK's map.
func toolSchema(t llm.Tool) (map[string]any, error) {
	s := t.InputSchema
	if len(s) == 0 {
		s = emptyParameters
	}
	return jsonObject(s)
}

// chatInput writes a conversation as Chat Completions messages: an
// assistant message's text as its content string and its tool calls in
// the same message; a user message's tool results as tool messages, its
// other parts as a content array (text, image_url, file; no document by
// URL).
var chatInput = inputFormat[openai.ChatCompletionMessageParamUnion, openai.ChatCompletionContentPartUnionParam]{
	plain: func(role llm.Role, text string) openai.ChatCompletionMessageParamUnion {
		if role == llm.RoleAssistant {
			return openai.ChatCompletionMessageParamUnion{OfAssistant: &openai.ChatCompletionAssistantMessageParam{
				Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String(text)}}}
		}
		return openai.ChatCompletionMessageParamUnion{OfUser: &openai.ChatCompletionUserMessageParam{
			Content: openai.ChatCompletionUserMessageParamContentUnion{OfString: openai.String(text)}}}
	},
	assistant: func(text param.Opt[string], calls []callParam) []openai.ChatCompletionMessageParamUnion {
		msg := &openai.ChatCompletionAssistantMessageParam{}
		msg.Content.OfString = text
		for _, c := range calls {
			msg.ToolCalls = append(msg.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: c.id,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.name, Arguments: c.arguments}}})
		}
		return []openai.ChatCompletionMessageParamUnion{{OfAssistant: msg}}
	},
	toolResult: func(callID, output string) openai.ChatCompletionMessageParamUnion {
		return openai.ChatCompletionMessageParamUnion{OfTool: &openai.ChatCompletionToolMessageParam{ToolCallID: callID,
			Content: openai.ChatCompletionToolMessageParamContentUnion{OfString: openai.String(output)}}}
	},
	user: func(content []openai.ChatCompletionContentPartUnionParam) openai.ChatCompletionMessageParamUnion {
		return openai.ChatCompletionMessageParamUnion{OfUser: &openai.ChatCompletionUserMessageParam{
			Content: openai.ChatCompletionUserMessageParamContentUnion{OfArrayOfContentParts: content}}}
	},
	text: func(s string) openai.ChatCompletionContentPartUnionParam {
		return openai.ChatCompletionContentPartUnionParam{OfText: &openai.ChatCompletionContentPartTextParam{Text: s}}
	},
	image: func(url string) openai.ChatCompletionContentPartUnionParam {
		return openai.ChatCompletionContentPartUnionParam{OfImageURL: &openai.ChatCompletionContentPartImageParam{
			ImageURL: openai.ChatCompletionContentPartImageImageURLParam{URL: url}}}
	},
	noDocumentURL: "Chat Completions takes no document by URL (a file part has file_data and file_id, no URL): send its bytes, or use the Responses API",
	file: func(dataURL, name string) openai.ChatCompletionContentPartUnionParam {
		return openai.ChatCompletionContentPartUnionParam{OfFile: &openai.ChatCompletionContentPartFileParam{
			File: openai.ChatCompletionContentPartFileFileParam{FileData: openai.String(dataURL), Filename: openai.String(name)}}}
	},
}

// completeChat is Complete on Chat Completions.
func (a *attempt) completeChat(ctx context.Context, req llm.Request, ids *wire.ToolIDs) (*llm.Response, error) {
	params, err := a.p.chatParams(req, ids)
	if err != nil {
		return nil, err
	}
	cc, r, err := send(ctx, a, req.Params.Extra, params, a.p.client.Chat.Completions.New)
	if err != nil {
		return nil, err
	}
	calls := wire.NewCallIDs(req.Messages, ids)
	return a.chatAnswer(cc, r, &calls)
}

// chatAnswer turns a decoded completion into the answer: the first
// choice's text and tool calls (named by ids: see wire.CallIDs), or the
// error it stands for.
func (a *attempt) chatAnswer(cc *openai.ChatCompletion, r classify.Reply, ids *wire.CallIDs) (*llm.Response, error) {
	if cc == nil || len(cc.Choices) == 0 {
		var body []byte
		if cc != nil {
			body = []byte(cc.RawJSON())
		}
		return nil, a.bodyError(withBody(r, body), `no "choices"`, nil) // an error sent with a 2xx
	}
	c := &cc.Choices[0]
	if f := a.withheld(r, c.FinishReason, c.Message.Refusal); f != nil {
		return nil, f
	}
	var calls []llm.ToolCall
	for _, tc := range c.Message.ToolCalls {
		calls = openaiwire.AppendCall(calls, ids, tc.ID, tc.Function.Name,
			rawArguments(tc.Function.Arguments, tc.Function.JSON.Arguments.Raw()))
	}
	return a.x.Clean(&llm.Response{
		Text:         c.Message.Content,
		Model:        cc.Model,
		ID:           cc.ID,
		RequestID:    classify.VendorOpenAI.RequestID(r.Header),
		FinishReason: c.FinishReason,
		Finish:       classify.FinishOf(c.FinishReason),
		ToolCalls:    calls,
		Usage:        chatUsage(&cc.Usage),
		RateLimit:    classify.VendorOpenAI.RateLimit(r.Header, r.Received),
	}), nil
}

// streamChat is Stream on Chat Completions: Complete's params with
// stream_options.include_usage (Params.Extra can still replace it).
func (a *attempt) streamChat(ctx context.Context, req llm.Request, ids *wire.ToolIDs) (llm.Stream, error) {
	params, err := a.p.chatParams(req, ids)
	if err != nil {
		return nil, err
	}
	params.StreamOptions.IncludeUsage = openai.Bool(true)
	var done *doneWatch
	calls := wire.NewCallIDs(req.Messages, ids)
	s, sdk, err := openStream(ctx, a, req.Params.Extra, params, a.p.client.Chat.Completions.NewStreaming,
		func(cc *openai.ChatCompletion, r classify.Reply) (*llm.Response, error) {
			return a.chatAnswer(cc, r, &calls)
		},
		watchDone(&done))
	if err != nil {
		return nil, err
	}
	if sdk != nil {
		s.step = (&chatEvents{s: s, sdk: sdk, ids: &calls, done: done}).step
	}
	return s, nil
}

// chatEvents reads a Chat Completions stream: see Stream.
type chatEvents struct {
	s       *stream
	sdk     *ssestream.Stream[openai.ChatCompletionChunk]
	ids     *wire.CallIDs // names the calls
	done    *doneWatch    // whether "data: [DONE]" arrived; nil if the body could not be watched
	calls   []*pendingCall
	byIndex map[int64]*pendingCall
}

// pendingCall is a streamed tool call being assembled.
type pendingCall struct {
	index    int64
	id, name string
	args     strings.Builder
}

// step reads one event: its text, or the end of the answer.
func (c *chatEvents) step() (string, bool, error) {
	s := c.s
	if !c.sdk.Next() {
		if err := c.sdk.Err(); err != nil || s.a.x.Failure() != nil {
			return "", false, s.eventError(err)
		}
		if (c.done == nil || !c.done.seen) && s.res.FinishReason == "" {
			// Neither [DONE] nor a finish_reason: cut short. A clean end
			// after the finish_reason is whole without [DONE], as the
			// native adapter reads it.
			return "", false, s.cut()
		}
		if f := s.withheld(); f != nil {
			return "", false, f
		}
		c.finishCalls()
		return "", true, nil
	}
	ch := c.sdk.Current()
	if ch.ID != "" {
		s.res.ID = ch.ID
	}
	if ch.Model != "" {
		s.res.Model = ch.Model
	}
	if ch.JSON.Usage.Valid() {
		s.res.Usage = chatUsage(&ch.Usage)
	}
	for i := range ch.Choices {
		choice := &ch.Choices[i]
		if choice.Index != 0 {
			continue // another of n choices
		}
		s.refuse(choice.Delta.Refusal)
		for j := range choice.Delta.ToolCalls {
			if err := c.add(&choice.Delta.ToolCalls[j]); err != nil {
				return "", false, err
			}
		}
		if choice.FinishReason != "" {
			s.res.FinishReason = choice.FinishReason
			s.res.Finish = classify.FinishOf(choice.FinishReason)
			c.finishCalls()
		}
		return choice.Delta.Content, false, nil
	}
	return "", false, nil
}

// add adds one piece of a tool call: a piece continues the call open at
// its index unless it carries another id (a server giving parallel calls
// one index), which opens a new call, as the first piece of an index does.
func (c *chatEvents) add(d *openai.ChatCompletionChunkChoiceDeltaToolCall) error {
	pc := c.byIndex[d.Index]
	if pc != nil && d.ID != "" && pc.id != "" && d.ID != pc.id {
		pc = nil
	}
	args := rawArguments(d.Function.Arguments, d.Function.JSON.Arguments.Raw())
	grow := len(args)
	if pc == nil {
		pc = &pendingCall{index: d.Index}
		if c.byIndex == nil {
			c.byIndex = map[int64]*pendingCall{}
		}
		c.byIndex[d.Index] = pc
		c.calls = append(c.calls, pc)
		grow += 64
	}
	if pc.id == "" {
		pc.id = d.ID
		grow += len(d.ID)
	}
	if pc.name == "" {
		pc.name = d.Function.Name
		grow += len(d.Function.Name)
	}
	if err := c.s.growCalls(grow); err != nil {
		return err
	}
	pc.args.WriteString(args)
	return nil
}

// finishCalls makes the calls assembled ready, in index order; a call
// without a name is dropped.
func (c *chatEvents) finishCalls() {
	slices.SortStableFunc(c.calls, func(a, b *pendingCall) int { return cmp.Compare(a.index, b.index) })
	for _, pc := range c.calls {
		c.s.ready = openaiwire.AppendCall(c.s.ready, c.ids, pc.id, pc.name, pc.args.String())
	}
	c.calls = c.calls[:0]
	clear(c.byIndex)
}

// chatUsage is a Chat Completions usage as the caller reads it: the cached
// prompt tokens (prompt_tokens_details.cached_tokens) are counted within
// prompt_tokens, and apart as the cache reads.
func chatUsage(u *openai.CompletionUsage) llm.Usage {
	return llm.Usage{InputTokens: int(u.PromptTokens), OutputTokens: int(u.CompletionTokens),
		CacheReadTokens: int(u.PromptTokensDetails.CachedTokens)}
}
