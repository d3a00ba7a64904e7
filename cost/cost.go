package cost

import (
	"math"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/llm"
)

// Cost is what an attempt, or a call's attempts together, cost.
type Cost struct {
	// Spent is what the tokens cost at the prices known.
	Spent Money
	// Unpriced is true when some of the tokens have no known price (the
	// catalogue does not know the model, or not that price): Spent is
	// then a lower bound. Give the target a Price to price them.
	Unpriced bool
	// Estimated is true when some of the tokens were estimated, not
	// reported by the provider: a stream cut before its final usage.
	Estimated bool
	// CacheLost is, of Spent, what leaving a warm prompt cache added: the
	// attempt went to a target other than the one holding the
	// conversation's cached prefix (a failover, a hedge), and the tokens
	// that target would have read from its cache were read at full
	// price. It is those tokens at this target's Input price less what
	// the warm target's CacheRead price would have made them cost, never
	// below 0; 0 when either price is unknown. It is part of Spent, not
	// added to it. docs/concepts.md ("Prompt caches") says how a chain
	// knows where a conversation's cache is.
	CacheLost Money
}

// Add returns c and d together.
func (c Cost) Add(d Cost) Cost {
	return Cost{Spent: c.Spent + d.Spent, Unpriced: c.Unpriced || d.Unpriced, Estimated: c.Estimated || d.Estimated,
		CacheLost: c.CacheLost + d.CacheLost}
}

// String formats c: "$0.0042", "≥$0.0042" when some tokens are unpriced,
// "~$0.0042" when some were estimated, followed by what a lost prompt
// cache added when it added anything: "$0.03 (cache lost $0.02)".
func (c Cost) String() string {
	s := c.Spent.String()
	if c.Estimated {
		s = "~" + s
	}
	if c.Unpriced {
		s = "≥" + s
	}
	if c.CacheLost > 0 {
		s += " (cache lost " + c.CacheLost.String() + ")"
	}
	return s
}

// perToken is a price in dollars per million tokens as nanodollars per
// token.
const perToken = float64(Dollar) / 1e6

// Of is what usage u cost at price p: the input tokens not read from or
// written to a cache at p.Input, cache reads at p.CacheRead, cache writes
// at p.CacheWrite and output tokens at p.Output. Tokens whose price is
// unknown (0) make the cost Unpriced, never free.
func Of(u llm.Usage, p catalog.Price) Cost {
	var c Cost
	var n float64
	add := func(tokens int, price float64) {
		if tokens <= 0 {
			return
		}
		if price <= 0 {
			c.Unpriced = true
			return
		}
		n += float64(tokens) * price * perToken
	}
	plain := u.InputTokens - u.CacheReadTokens - u.CacheWriteTokens
	add(plain, p.Input)
	add(u.CacheReadTokens, p.CacheRead)
	add(u.CacheWriteTokens, p.CacheWrite)
	add(u.OutputTokens, p.Output)
	c.Spent = Money(math.Round(n))
	return c
}

// WorstCase is the most an attempt sending req may cost at price p: its
// estimated prompt (EstimateInput) at the dearer of p.Input and
// p.CacheWrite, and its output limit at p.Output. The output limit is
// req.Params.MaxTokens, or maxOutput (the model's, from the catalogue)
// when the request sets none. A price or a limit that is unknown makes
// the worst case Unpriced: its Spent is then not a bound.
func WorstCase(req *llm.Request, p catalog.Price, maxOutput int) Cost {
	out := req.Params.MaxTokens
	if out <= 0 {
		out = maxOutput
	}
	c := Of(llm.Usage{InputTokens: EstimateInput(req), OutputTokens: out}, catalog.Price{Input: max(p.Input, p.CacheWrite), Output: p.Output})
	c.Estimated = true
	if out <= 0 {
		c.Unpriced = true
	}
	return c
}

// Prices of the parts a byte count says little about, in tokens: an
// image (the most a provider charges for one it resizes, about 1,600
// tokens on Anthropic's and OpenAI's pages) and media known only by its
// URL.
const (
	imageTokens = 1600
	urlTokens   = 1600
)

// EstimateInput estimates the input tokens req counts, erring high: three
// bytes per token of its text (system prompt, messages, tool calls and
// results, tool definitions and the response schema), where English runs
// near four, and about 1,600 tokens per image. A document counts three
// bytes per token of its data. It reads no tokenizer: it is what a
// budget reserves before the provider reports the real count.
func EstimateInput(req *llm.Request) int {
	b := len(req.System) + len(req.ResponseSchema)
	for i := range req.Tools {
		t := &req.Tools[i]
		b += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	n := 0
	for i := range req.Messages {
		m := &req.Messages[i]
		b += len(m.Content)
		for j := range m.Parts {
			p := &m.Parts[j]
			b += len(p.Text)
			switch {
			case p.Media != nil && p.Media.URL != "" && len(p.Media.Data) == 0:
				n += urlTokens
			case p.Media != nil && !p.Media.IsDocument():
				n += imageTokens
			case p.Media != nil:
				b += len(p.Media.Data)
			}
			if p.ToolCall != nil {
				b += len(p.ToolCall.Name) + len(p.ToolCall.Arguments)
			}
			if p.ToolResult != nil {
				b += len(p.ToolResult.Content)
			}
		}
	}
	return n + (b+2)/3
}

// Cut is what an answer cut short cost (a stream that failed, or was
// abandoned, after it began): the usage the provider had reported, with
// the output raised to what resp holds (its text and tool calls, four
// bytes per token) when the provider had reported less, and then
// Estimated. A provider bills what it generated before the cut.
func Cut(resp *llm.Response, p catalog.Price) Cost {
	u := resp.Usage
	b := len(resp.Text)
	for i := range resp.ToolCalls {
		b += len(resp.ToolCalls[i].Name) + len(resp.ToolCalls[i].Arguments)
	}
	est := false
	if n := (b + 3) / 4; n > u.OutputTokens {
		u.OutputTokens, est = n, true
	}
	c := Of(u, p)
	c.Estimated = c.Estimated || est
	return c
}

// Unanswered is what an attempt canceled before it answered may have
// cost (a chain prices so a hedge that lost its race, and an attempt its
// Timeout cut): its estimated prompt at p.Input, the provider having read
// it, Estimated. Output is not counted: none was seen.
func Unanswered(req *llm.Request, p catalog.Price) Cost {
	c := Of(llm.Usage{InputTokens: EstimateInput(req)}, catalog.Price{Input: p.Input})
	c.Estimated = true
	return c
}
