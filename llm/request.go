package llm

// Role is the author of a Message.
type Role string

// The roles a conversation message can have. The system prompt is not a
// message: it travels in Request.System.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
)

// Message is one turn of a conversation.
type Message struct {
	Role    Role
	Content string
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
}

// Float returns a pointer to f, for Params.Temperature and Params.TopP.
func Float(f float64) *float64 { return &f }
