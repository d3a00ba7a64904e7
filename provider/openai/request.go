package openai

import "github.com/backstop-llm/backstop/llm"

// request is the Chat Completions request body.
type request struct {
	Model               string    `json:"model"`
	Messages            []message `json:"messages"`
	MaxCompletionTokens int       `json:"max_completion_tokens,omitempty"`
	MaxTokens           int       `json:"max_tokens,omitempty"`
	Temperature         *float64  `json:"temperature,omitempty"`
	TopP                *float64  `json:"top_p,omitempty"`
	Stop                []string  `json:"stop,omitempty"`
}

type message struct {
	Role    llm.Role `json:"role"`
	Content string   `json:"content"`
}

// roleSystem carries Request.System as the first message.
const roleSystem llm.Role = "system"

func (p *Provider) newRequest(req llm.Request) *request {
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
	for _, m := range req.Messages {
		r.Messages = append(r.Messages, message{Role: m.Role, Content: m.Content})
	}
	return r
}
