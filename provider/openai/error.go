package openai

import (
	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// parseError turns an error reply into an *llm.Error, the key redacted. It
// never fails: a body it cannot read is classified by status and quoted.
func (p *Provider) parseError(r *wire.Reply) *llm.Error {
	e, err := openaiwire.ParseError(r.Body)
	var f *llm.Error
	switch {
	case err != nil:
		f = p.ep.Malformed(r, err)
	default:
		// One table for every adapter of OpenAI's models (classify.Classify);
		// a message alone ({"error":"message"}) is classified by status.
		f = p.ep.Failure(r, classify.VendorOpenAI.Kind(r.Status, e.Type, e.Code, e.Message, nil))
		f.Type, f.Code, f.Detail = e.Type, e.Code, p.ep.Detail(e.Message)
	}
	return p.ep.Redact(f)
}
