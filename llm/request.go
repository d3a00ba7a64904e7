package llm

import "encoding/json"

// Role is the author of a Message.
type Role string

// The roles a conversation message can have. The system prompt is not a
// message: it travels in Request.System.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one turn of a conversation: plain text in Content, and
// anything else (images, documents, tool calls, tool results, more text) in
// Parts, in order, after Content's text when both are set. See Part for
// which parts each role may carry; Request.Validate checks it.
type Message struct {
	Role Role
	// Content is plain text: shorthand for one text part, first.
	Content string
	// Parts is everything else, in order.
	Parts []Part
}

// Params are the sampling parameters of a request. Zero values mean "not
// set": the provider's own default applies, except MaxTokens, which providers
// that require it fill with their documented default.
type Params struct {
	// MaxTokens caps the length of the answer in tokens. Zero means the
	// provider's default (Anthropic requires a value; its adapter sends 1024).
	MaxTokens int
	// Temperature and TopP are pointers so that 0 can be sent deliberately.
	Temperature, TopP *float64
	// Stop lists sequences that end the answer.
	Stop []string
	// Extra holds provider-specific body fields, merged into the JSON body
	// as top-level keys. A key that the adapter already sets is overridden.
	Extra map[string]any
}

// Request is one model call: the conversation, the system prompt, the model
// and its parameters. In a chain, each target fills Model and may replace
// System and Params with its own.
type Request struct {
	System   string
	Messages []Message
	Model    string
	Params   Params
	// Tools are the tools the model may call; its calls come back in
	// Response.ToolCalls.
	Tools []Tool
	// ToolChoice says whether and which tool the model must call; the zero
	// value lets it choose (auto).
	ToolChoice ToolChoice
	// ResponseSchema, when set, asks the provider for native structured
	// output: an answer constrained to this JSON Schema. A chain sets it for
	// the targets with NativeSchema; the chain validates the answer against
	// its full schema all the same.
	ResponseSchema json.RawMessage
}

// Float returns a pointer to f, for Params.Temperature and Params.TopP.
func Float(f float64) *float64 { return &f }
