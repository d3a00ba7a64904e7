package anthropic

import "github.com/backstop-llm/backstop/llm"

// request is the Messages API request body.
type request struct {
	Model         string    `json:"model"`
	MaxTokens     int       `json:"max_tokens"`
	System        string    `json:"system,omitempty"`
	Messages      []message `json:"messages"`
	Temperature   *float64  `json:"temperature,omitempty"`
	TopP          *float64  `json:"top_p,omitempty"`
	StopSequences []string  `json:"stop_sequences,omitempty"`
}

type message struct {
	Role    llm.Role `json:"role"`
	Content string   `json:"content"`
}

func newRequest(req llm.Request) *request {
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
		r.MaxTokens = DefaultMaxTokens
	}
	for i, m := range req.Messages {
		r.Messages[i] = message{Role: m.Role, Content: m.Content}
	}
	return r
}
