package fake

import (
	"math"
	"strconv"
	"time"
)

// Limits are a model's per-minute rate limits, which the fake reports in
// rate-limit response headers (see RateLimits). It reports them only: it
// never refuses a request for exceeding them (script RateLimited for that).
type Limits struct {
	Requests     int // requests per minute
	InputTokens  int // input tokens per minute
	OutputTokens int // output tokens per minute
}

// defaultLimits are the limits of a model that has none set.
var defaultLimits = Limits{Requests: 4000, InputTokens: 2_000_000, OutputTokens: 400_000}

// off reports whether l turns the headers off.
func (l Limits) off() bool { return l == Limits{} }

// bucket is one model's token buckets: what remains of each limit, as of t.
type bucket struct {
	l            Limits
	req, in, out float64
	t            time.Time
}

// RateLimits sets model's per-minute limits and refills its buckets. Every
// accepted request for model (one the fake did not reject) then takes one
// request, its input tokens (the usage estimate, or Usage) and its output
// tokens (an answer's; none for an error) from buckets that refill
// continuously, each at its limit per minute, on time.Now (so in virtual
// time under testing/synctest). Remaining counts stop at 0.
//
// Responses to accepted requests carry the buckets' state:
//
//   - Anthropic: anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset},
//     reset an RFC 3339 time (UTC, rounded up to the second) at which the
//     bucket is full again; tokens is input and output tokens together.
//   - OpenAI: x-ratelimit-{limit,remaining,reset}-{requests,tokens}, reset a
//     Go duration rounded to the millisecond ("0s", "12ms", "1.5s",
//     "6m0s"); tokens is input and output tokens together.
//
// Azure answers carry the OpenAI headers; Bedrock, Vertex and Gemini
// answers carry none (their requests still drain the buckets). An
// outcome's Header overrides any of them. By default every model has
// Limits{Requests: 4000, InputTokens: 2000000, OutputTokens: 400000}. Model
// "" sets the limits of every model that has none of its own. The zero
// Limits turns the headers off.
func (s *Server) RateLimits(model string, l Limits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if model == "" {
		s.defLimits = &l
		for name := range s.buckets {
			if !s.ownLimits[name] {
				delete(s.buckets, name)
			}
		}
		return
	}
	if s.ownLimits == nil {
		s.ownLimits = make(map[string]bool)
	}
	s.ownLimits[model] = true
	if s.buckets == nil {
		s.buckets = make(map[string]*bucket)
	}
	s.buckets[model] = &bucket{l: l, req: float64(l.Requests), in: float64(l.InputTokens), out: float64(l.OutputTokens), t: time.Now()}
}

// consume takes one request of in and out tokens from model's buckets and
// returns the rate-limit headers for its response in format f.
func (s *Server) consume(f Format, model string, in, out int) []header {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	b := s.buckets[model]
	if b == nil {
		l := defaultLimits
		if s.defLimits != nil {
			l = *s.defLimits
		}
		b = &bucket{l: l, req: float64(l.Requests), in: float64(l.InputTokens), out: float64(l.OutputTokens), t: now}
		if s.buckets == nil {
			s.buckets = make(map[string]*bucket)
		}
		s.buckets[model] = b
	}
	if b.l.off() {
		return nil
	}
	if el := now.Sub(b.t); el > 0 {
		frac := float64(el) / float64(time.Minute)
		b.req = math.Min(float64(b.l.Requests), b.req+frac*float64(b.l.Requests))
		b.in = math.Min(float64(b.l.InputTokens), b.in+frac*float64(b.l.InputTokens))
		b.out = math.Min(float64(b.l.OutputTokens), b.out+frac*float64(b.l.OutputTokens))
		b.t = now
	}
	b.req = math.Max(0, b.req-1)
	b.in = math.Max(0, b.in-float64(in))
	b.out = math.Max(0, b.out-float64(out))
	if f == Bedrock || f == Vertex || f.family() == Gemini {
		return nil // the platforms send no rate-limit headers
	}

	// wait is how long a bucket of limit with rem left takes to fill.
	wait := func(limit int, rem float64) time.Duration {
		if limit <= 0 {
			return 0
		}
		return time.Duration((float64(limit) - rem) / float64(limit) * float64(time.Minute))
	}
	reqWait := wait(b.l.Requests, b.req)
	inWait, outWait := wait(b.l.InputTokens, b.in), wait(b.l.OutputTokens, b.out)
	tokLimit := b.l.InputTokens + b.l.OutputTokens
	tokRem := int(b.in) + int(b.out)
	tokWait := max(inWait, outWait)
	itoa := strconv.Itoa
	if f == Anthropic {
		at := func(d time.Duration) string {
			t := now.Add(d).UTC()
			if t2 := t.Truncate(time.Second); t2.Before(t) {
				t = t2.Add(time.Second)
			}
			return t.Format(time.RFC3339)
		}
		const p = "Anthropic-Ratelimit-"
		return []header{
			{p + "Requests-Limit", itoa(b.l.Requests)}, {p + "Requests-Remaining", itoa(int(b.req))}, {p + "Requests-Reset", at(reqWait)},
			{p + "Tokens-Limit", itoa(tokLimit)}, {p + "Tokens-Remaining", itoa(tokRem)}, {p + "Tokens-Reset", at(tokWait)},
			{p + "Input-Tokens-Limit", itoa(b.l.InputTokens)}, {p + "Input-Tokens-Remaining", itoa(int(b.in))}, {p + "Input-Tokens-Reset", at(inWait)},
			{p + "Output-Tokens-Limit", itoa(b.l.OutputTokens)}, {p + "Output-Tokens-Remaining", itoa(int(b.out))}, {p + "Output-Tokens-Reset", at(outWait)},
		}
	}
	dur := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return []header{
		{"X-Ratelimit-Limit-Requests", itoa(b.l.Requests)}, {"X-Ratelimit-Remaining-Requests", itoa(int(b.req))}, {"X-Ratelimit-Reset-Requests", dur(reqWait)},
		{"X-Ratelimit-Limit-Tokens", itoa(tokLimit)}, {"X-Ratelimit-Remaining-Tokens", itoa(tokRem)}, {"X-Ratelimit-Reset-Tokens", dur(tokWait)},
	}
}
