package chain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/llm"
)

// Defaults of LastGood.
const (
	// DefaultLastGoodMaxAge is the oldest answer LastGood serves unless
	// WithMaxAge says otherwise.
	DefaultLastGoodMaxAge = 24 * time.Hour
)

var (
	// ErrNoLastGood is LastGood's error when no answer is remembered for
	// the question: the chain then fails rather than invent one.
	ErrNoLastGood = errors.New("no last-known-good answer for this question")
	// ErrLastGoodTooOld is LastGood's error when the remembered answer is
	// older than its MaxAge.
	ErrLastGoodTooOld = errors.New("the last-known-good answer is older than MaxAge")
)

// LastGoodOption configures LastGood.
type LastGoodOption func(*lastGood)

// WithKey replaces the key a question is remembered under. The default is a
// hash of the chain's name and the caller's messages (roles and contents),
// not the per-target prompts, so that the same question asked of any target
// shares one entry. Use it to key on fewer fields (a normalised question) or
// more (a tenant).
func WithKey(fn func(chain string, req llm.Request) string) LastGoodOption {
	return func(l *lastGood) { l.key = fn }
}

// WithMaxAge sets the oldest remembered answer LastGood serves. 0 means
// DefaultLastGoodMaxAge (24h); a negative value means no limit.
func WithMaxAge(d time.Duration) LastGoodOption {
	return func(l *lastGood) { l.maxAge = d }
}

// WithTTL sets how long the store keeps a remembered answer. 0 means the
// store's default.
func WithTTL(d time.Duration) LastGoodOption {
	return func(l *lastGood) { l.ttl = d }
}

// LastGood returns a degradation that serves the last answer a model target
// gave to the same question, when every model target has failed now. Every
// answer a model target gives, once validated, is remembered in store; a
// remembered answer is validated again when served (the schema may have
// changed since) and served with Result.Degraded set and its age in
// Result.Age. A question never answered gets no answer from it
// (ErrNoLastGood): the chain fails with ErrExhausted rather than invent one.
// It is named "last-good".
//
// Remembering costs a store write on every successful call; with a remote
// store, mind its latency.
func LastGood(store cache.Store, opts ...LastGoodOption) Degradation {
	l := &lastGood{store: store}
	for _, o := range opts {
		o(l)
	}
	if l.maxAge == 0 {
		l.maxAge = DefaultLastGoodMaxAge
	}
	return l
}

type lastGood struct {
	store  cache.Store
	key    func(chain string, req llm.Request) string
	maxAge time.Duration
	ttl    time.Duration
	chain  string // set on the copy Build binds to a chain
}

func (*lastGood) Name() string { return "last-good" }

// bind returns a copy of l for the chain named name.
func (l *lastGood) bind(name string) *lastGood {
	c := *l
	c.chain = name
	return &c
}

func (l *lastGood) keyOf(req llm.Request) string {
	if l.key != nil {
		return l.key(l.chain, req)
	}
	parts := make([]string, 0, 1+2*len(req.Messages))
	parts = append(parts, l.chain)
	for _, m := range req.Messages {
		parts = append(parts, string(m.Role), m.Content)
	}
	return cache.Key(parts...)
}

// remembered is what LastGood stores: enough to serve the answer again and
// to say where it came from.
type remembered struct {
	Text         string    `json:"text"`
	Model        string    `json:"model,omitempty"`
	ID           string    `json:"id,omitempty"`
	RequestID    string    `json:"request_id,omitempty"`
	FinishReason string    `json:"finish_reason,omitempty"`
	Usage        llm.Usage `json:"usage"`
	Target       string    `json:"target,omitempty"`
}

// remember stores resp, served by target, as the answer to req.
func (l *lastGood) remember(ctx context.Context, req llm.Request, target string, resp *llm.Response) error {
	v, err := json.Marshal(remembered{Text: resp.Text, Model: resp.Model, ID: resp.ID, RequestID: resp.RequestID,
		FinishReason: resp.FinishReason, Usage: resp.Usage, Target: target})
	if err != nil {
		return err
	}
	return l.store.Set(ctx, l.keyOf(req), cache.Entry{Value: v, Stored: time.Now()}, l.ttl)
}

// Degrade serves the remembered answer to req, if any and young enough.
func (l *lastGood) Degrade(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, _, err := l.recall(ctx, req)
	return resp, err
}

// recall returns the remembered answer to req and its age.
func (l *lastGood) recall(ctx context.Context, req llm.Request) (*llm.Response, time.Duration, error) {
	e, ok, err := l.store.Get(ctx, l.keyOf(req))
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("reading the last-known-good store: %w", err)
	case !ok:
		return nil, 0, ErrNoLastGood
	}
	age := time.Since(e.Stored)
	if l.maxAge > 0 && age > l.maxAge {
		return nil, age, fmt.Errorf("%w (%v > %v)", ErrLastGoodTooOld, age.Round(time.Second), l.maxAge)
	}
	var r remembered
	if err := json.Unmarshal(e.Value, &r); err != nil {
		return nil, age, fmt.Errorf("the remembered answer is not readable: %w", err)
	}
	return &llm.Response{Text: r.Text, Model: r.Model, ID: r.ID, RequestID: r.RequestID,
		FinishReason: r.FinishReason, Usage: r.Usage}, age, nil
}
