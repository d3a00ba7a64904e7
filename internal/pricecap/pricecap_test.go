package pricecap_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/internal/pricecap"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

var price = catalog.Price{Input: 1, Output: 5}

// TestCapPricesThePrimaryAsItWouldSend: the primary is priced with the
// caller's System and MaxTokens where it sets none, not with the capped
// target's own, and with its own where it sets them; in Plan and Peek
// (no request) the cap admits.
func TestCapPricesThePrimaryAsItWouldSend(t *testing.T) {
	caller := llm.Request{System: "short", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Params: llm.Params{MaxTokens: 100}}
	sent := caller
	sent.System = strings.Repeat("a long system prompt of the fallback's own. ", 200) // ~3,000 tokens
	for _, tc := range []struct {
		name    string
		cap     pricecap.Cap
		caller  *llm.Request
		refused bool
	}{
		{"the caller's System and MaxTokens", pricecap.Cap{Ratio: 2, Price: price}, &caller, true},
		{"without the caller's: the sent request's", pricecap.Cap{Ratio: 2, Price: price}, nil, false},
		{"the primary's own System", pricecap.Cap{Ratio: 2, Price: price, System: sent.System}, &caller, false},
		{"the primary's own MaxTokens", pricecap.Cap{Ratio: 2, Price: price, MaxTokens: 4000}, &caller, false},
	} {
		adm := tc.cap.Admit(t.Context(), &policy.Attempt{Phase: policy.Send, Request: &sent, Caller: tc.caller, Price: price})
		if refused := adm.Err != nil; refused != tc.refused {
			t.Errorf("%s: %v; want refused %v", tc.name, adm.Err, tc.refused)
		}
		if adm.Err != nil && (!errors.Is(adm.Err, pricecap.ErrPriceCap) || adm.Cause != observe.SkipPrice || !strings.HasPrefix(adm.Reason, "worst case $")) {
			t.Errorf("%s: %v, %v, %q", tc.name, adm.Err, adm.Cause, adm.Reason)
		}
	}
	c := pricecap.Cap{Ratio: 1, Price: price}
	for _, ph := range []policy.Phase{policy.Plan, policy.Peek} {
		if adm := c.Admit(t.Context(), &policy.Attempt{Phase: ph, Price: catalog.Price{Input: 100, Output: 500}}); adm.Err != nil {
			t.Errorf("phase %v without a request: %v; want admitted (Send decides)", ph, adm.Err)
		}
	}
}
