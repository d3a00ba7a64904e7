package chain

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/answer"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
)

// degrade runs the degradations in order until one gives an answer that
// passes the chain's Schema, fills the result from it and returns it; each
// failure is recorded and added to the causes. They run on past the
// walk's deadline (not past the caller's cancellation), each for at most
// DegradeTimeout, and all of them together end at most one DegradeTimeout
// after that deadline.
func (w *walk) degrade(req *llm.Request) *degrader {
	c := w.c
	var end time.Time // when every degradation must have answered; zero for no bound in all
	if !w.deadline.IsZero() {
		end = w.deadline.Add(c.degradeTimeout)
	}
	for i := range c.degrades {
		g := &c.degrades[i]
		if canceled(w.ctx) != nil {
			return nil
		}
		timeout := c.degradeTimeout
		if !end.IsZero() {
			timeout = min(timeout, time.Until(end))
		}
		resp, age, js, a := w.ask(g, timeout, req)
		if a.Err != nil {
			w.record(a)
			w.causes = append(w.causes, &TargetError{Target: g.name, Tier: TierDegrade, Err: a.Err})
			continue
		}
		w.record(a)
		res := w.res
		cp := *resp
		res.Response, res.JSON, res.Degraded, res.Age = &cp, js, true, age
		res.Served = Served{Target: g.name, Tier: TierDegrade, Provider: "backstop", Model: resp.Model, RequestID: resp.RequestID}
		return g
	}
	return nil
}

// ask asks degradation g for an answer within timeout and validates it:
// the answer, a remembered answer's age, its JSON and the attempt's record.
func (w *walk) ask(g *degrader, timeout time.Duration, req *llm.Request) (*llm.Response, time.Duration, json.RawMessage, Attempt) {
	c := w.c
	ctx, obs := w.obs.StartAttempt(context.WithoutCancel(w.ctx), &g.ob, observe.AttemptStart{N: 1, Request: *req})
	ctx, cancel := context.WithTimeout(ctx, timeout)
	start := c.clock()
	var resp *llm.Response
	var age time.Duration
	var err error
	if g.mem != nil {
		resp, age, err = g.mem.Recall(ctx, *req)
	} else {
		resp, err = g.d.Degrade(ctx, *req)
	}
	elapsed := c.clock() - start
	cancel()
	if err == nil && resp == nil {
		err = errNilResponse
	}
	var js json.RawMessage
	if err == nil && c.schema != nil {
		if js, err = c.schema.Validate(resp.Text); err != nil {
			err = answer.InvalidOutput("backstop", 0, "", err)
		}
	}
	a := Attempt{Target: g.name, Tier: TierDegrade, N: 1, Duration: elapsed}
	if err != nil {
		a.Kind, a.Err, a.Decision, a.Reason = llm.KindOf(err), err, DecisionNext, degradeReason(err, timeout)
		w.obs.EndAttempt(obs, &g.ob, observe.AttemptEnd{N: 1, Kind: a.Kind, Err: err, Duration: elapsed})
		return nil, 0, nil, a
	}
	w.obs.EndAttempt(obs, &g.ob, observe.AttemptEnd{N: 1, Response: resp, RequestID: resp.RequestID, Duration: elapsed})
	a.RequestID, a.Decision = resp.RequestID, DecisionServed
	return resp, age, js, a
}

var errNilResponse = errors.New("degradation returned neither an answer nor an error")

// degradeReason says in words why a degradation served nothing.
func degradeReason(err error, timeout time.Duration) string {
	switch {
	case errors.Is(err, degrade.ErrNoLastGood):
		return "nothing remembered for this question"
	case errors.Is(err, degrade.ErrLastGoodTooOld):
		return "the remembered answer is older than its MaxAge"
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer within " + timeout.Round(time.Millisecond).String() + " (DegradeTimeout)"
	case errors.Is(err, errNilResponse):
		return "it returned neither an answer nor an error"
	case llm.KindOf(err) == llm.KindInvalidOutput:
		return "its answer does not match the chain's schema"
	}
	return "it failed: " + llm.KindOf(err).String()
}
