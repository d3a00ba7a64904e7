package degrade

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/internal/check"
	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// Defaults of LastGood.
const (
	// defaultMaxAge is the oldest answer LastGood serves when
	// LastGoodConfig.MaxAge is 0.
	defaultMaxAge = 24 * time.Hour
	// lastGoodQueue is how many answers a LastGood on a store that is not
	// in-process keeps waiting to be written, per chain; an answer served
	// while that many wait is not remembered (chain.Chain.Flush counts
	// them).
	lastGoodQueue = 256
)

// writeTimeout bounds each write behind the call to a store that does not
// bound its own (not a cache.Bounded): the chain's DegradeTimeout default, 2s.
const writeTimeout = 2 * time.Second

var (
	// ErrNoLastGood is LastGood's error when no answer is remembered for
	// the question: the chain then fails rather than invent one.
	ErrNoLastGood = errors.New("no last-known-good answer for this question")
	// ErrLastGoodTooOld is LastGood's error when the remembered answer is
	// older than its MaxAge.
	ErrLastGoodTooOld = errors.New("the last-known-good answer is older than MaxAge")
)

var errHead = problems.Head("degrade: invalid configuration")

// LastGoodConfig configures LastGood. Store is required; every other
// field's zero value means its documented default.
type LastGoodConfig struct {
	// Store keeps the remembered answers: a *cache.Memory in-process, a
	// redisstore.Cache to share them between replicas, or one of your own.
	// Required.
	Store cache.Store
	// Key returns the key a question is remembered under, given the call's
	// context (when remembering and when recalling alike: it may hold a
	// tenant, a user's locale) and the chain's name. nil means a hash of
	// the chain's name and everything the caller sends that shapes the
	// answer: its System prompt, its messages (roles, contents and parts:
	// text, tool calls and results, images and documents by the hash of
	// their bytes), its tools, tool choice and response schema; not the
	// per-target prompts, so that the same question asked of any target
	// shares one entry, and the same words under another System prompt
	// (another tenant's, another product's) do not. Set it to key on fewer
	// fields (a normalised question) or more.
	Key func(ctx context.Context, chain string, req llm.Request) string
	// MaxAge is the oldest remembered answer LastGood serves. 0 means
	// 24h; a negative value means no limit.
	MaxAge time.Duration
	// TTL is how long the store keeps a remembered answer. 0 means the
	// store's default; it must not be negative.
	TTL time.Duration
}

// Validate reports every problem with c at once, each matching the
// module's invalid-configuration sentinel (llm.ErrInvalidConfig).
func (c LastGoodConfig) Validate() error {
	found := problems.In(errHead, "last-good")
	if check.IsNil(c.Store) {
		found.Addf("Store is nil; pass one, such as cache.NewMemory's or redisstore.NewCache's")
	}
	problems.NotNegative(found, "TTL", c.TTL, "the store's default")
	return found.Err()
}

// LastGood returns a degradation that serves the last answer a model target
// gave to the same question, when every model target has failed now. Every
// answer a model target gives, once validated, is remembered in cfg.Store;
// a remembered answer is validated again when served (the schema may have
// changed since) and served with chain.Result.Degraded set and its age in
// chain.Result.Age. A question never answered gets no answer from it
// (ErrNoLastGood): the chain fails with chain.ErrExhausted rather than
// invent one. It is named "last-good". cfg's problems (see
// LastGoodConfig.Validate) fail the chain's Build.
//
// One LastGood may serve several chains: Build binds a copy to each, whose
// answers are keyed under that chain's name.
//
// Remembering never adds latency to a call. A *cache.Memory is written on
// the calling goroutine (it costs well under a microsecond). Any other store
// (redisstore.Cache, or one of your own) is written behind the call: the
// answer is queued, and one goroutine per chain writes the queue in order,
// each write with the call's context values but not its cancellation or
// deadline, bounded by the store's own Timeout (a cache.Bounded such as
// redisstore.Cache) or, for a store of another kind, by 2s
// (chain.Builder.DegradeTimeout's default). The goroutine exits as soon as the queue
// is empty. At most 256 answers wait per chain; an answer served while the
// queue is full is not remembered. Call chain.Chain.Flush before a replica
// stops: it waits for the answers still waiting, so that none is lost, and
// reports those that were not remembered.
func LastGood(cfg LastGoodConfig) Degradation {
	if cfg.MaxAge == 0 {
		cfg.MaxAge = defaultMaxAge
	}
	return &lastGood{cfg: cfg}
}

type lastGood struct {
	cfg   LastGoodConfig
	chain string // set on the copy Bind returns
	// behind writes the answers of the copy bound to a chain, unless its
	// store is in-process (nil: Remember writes on the calling goroutine).
	behind *writeBehind
}

func (*lastGood) Name() string { return "last-good" }

// Bind returns a copy of l for the chain named chain, with a write-behind
// of its own unless the store is in-process, or l's configuration's
// problems.
func (l *lastGood) Bind(chain string, _ *validate.Schema) (Degradation, error) {
	if err := l.cfg.Validate(); err != nil {
		return nil, err
	}
	c := *l
	c.chain = chain
	c.behind = nil
	switch s := l.cfg.Store.(type) {
	case *cache.Memory:
	case cache.Bounded:
		c.behind = &writeBehind{store: s} // each Set bounded by the store's Timeout
	default:
		c.behind = &writeBehind{store: s, bound: writeTimeout}
	}
	return &c, nil
}

// keyOf is the key req is remembered under; see LastGoodConfig.Key.
func (l *lastGood) keyOf(ctx context.Context, req llm.Request) string {
	if l.cfg.Key != nil {
		return l.cfg.Key(ctx, l.chain, req)
	}
	return cache.Key(keyParts(l.chain, &req)...)
}

// keyParts lists everything in req that shapes the answer, after the
// chain's name: the System prompt, each message's role, content and parts
// (media by the SHA-256 of their bytes, not by URL alone), the tools, the
// tool choice and the response schema. A text-only conversation's parts are
// the same as in version "v2", so its remembered answers stay valid; "v3"
// marks a request that carries more.
func keyParts(chain string, req *llm.Request) []string {
	version := "v2" // the System prompt is part of the key since v2
	if rich(req) {
		version = "v3"
	}
	parts := make([]string, 0, 3+2*len(req.Messages))
	parts = append(parts, chain, version, req.System)
	for i := range req.Messages {
		m := &req.Messages[i]
		parts = append(parts, string(m.Role), m.Content)
		if version == "v2" {
			continue
		}
		parts = append(parts, strconv.Itoa(len(m.Parts)))
		for _, p := range m.Parts {
			parts = appendPart(parts, &p)
		}
	}
	if version == "v2" {
		return parts
	}
	parts = append(parts, "tools", strconv.Itoa(len(req.Tools)))
	for _, t := range req.Tools {
		parts = append(parts, t.Name, t.Description, string(t.InputSchema))
	}
	return append(parts, req.ToolChoice.Mode.String(), req.ToolChoice.Name, string(req.ResponseSchema))
}

// rich reports whether req carries more than text.
func rich(req *llm.Request) bool {
	if len(req.Tools) > 0 || req.ToolChoice != (llm.ToolChoice{}) || len(req.ResponseSchema) > 0 {
		return true
	}
	for i := range req.Messages {
		if len(req.Messages[i].Parts) > 0 {
			return true
		}
	}
	return false
}

// appendPart appends the key parts of p: its kind, then what it holds.
func appendPart(parts []string, p *llm.Part) []string {
	switch {
	case p.Media != nil:
		sum := sha256.Sum256(p.Media.Data)
		return append(parts, "media", p.Media.MediaType, p.Media.URL, string(sum[:]))
	case p.ToolCall != nil:
		return append(parts, "call", p.ToolCall.ID, p.ToolCall.Name, string(p.ToolCall.Arguments))
	case p.ToolResult != nil:
		return append(parts, "result", p.ToolResult.CallID, p.ToolResult.Content, strconv.FormatBool(p.ToolResult.IsError))
	}
	return append(parts, "text", p.Text)
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
	// ToolCalls are the answer's tool calls; the key covers the request's
	// tools, so they are served only for the same tools.
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
}

// Remember stores resp, served by target, as the answer to req: at once
// for an in-process store, otherwise through the write-behind, without
// waiting (see LastGood). req and resp are read before it returns.
func (l *lastGood) Remember(ctx context.Context, req llm.Request, target string, resp *llm.Response) error {
	v, err := json.Marshal(remembered{Text: resp.Text, Model: resp.Model, ID: resp.ID, RequestID: resp.RequestID,
		FinishReason: resp.FinishReason, Usage: resp.Usage, Target: target, ToolCalls: resp.ToolCalls})
	if err != nil {
		return err
	}
	e := cache.Entry{Value: v, Stored: time.Now()}
	if l.behind == nil {
		return l.cfg.Store.Set(ctx, l.keyOf(ctx, req), e, l.cfg.TTL)
	}
	return l.behind.add(ctx, l.keyOf(ctx, req), e, l.cfg.TTL)
}

// Flush waits, until ctx ends, for the answers remembered before it was
// called to be written, and reports those that were not remembered since
// the last Flush: dropped (the queue was full) or failed (the store's
// error), and those still waiting when ctx ended.
func (l *lastGood) Flush(ctx context.Context) error {
	if l.behind == nil {
		return nil
	}
	return l.behind.flush(ctx)
}

// Degrade serves the remembered answer to req, if any and young enough.
func (l *lastGood) Degrade(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, _, err := l.Recall(ctx, req)
	return resp, err
}

// Recall returns the remembered answer to req and its age.
func (l *lastGood) Recall(ctx context.Context, req llm.Request) (*llm.Response, time.Duration, error) {
	e, ok, err := l.cfg.Store.Get(ctx, l.keyOf(ctx, req))
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("reading the last-known-good store: %w", err)
	case !ok:
		return nil, 0, ErrNoLastGood
	}
	age := time.Since(e.Stored)
	if l.cfg.MaxAge > 0 && age > l.cfg.MaxAge {
		return nil, age, fmt.Errorf("%w (%v > %v)", ErrLastGoodTooOld, age.Round(time.Second), l.cfg.MaxAge)
	}
	var r remembered
	if err := json.Unmarshal(e.Value, &r); err != nil {
		return nil, age, fmt.Errorf("the remembered answer is not readable: %w", err)
	}
	return &llm.Response{Text: r.Text, Model: r.Model, ID: r.ID, RequestID: r.RequestID,
		FinishReason: r.FinishReason, Finish: classify.FinishOf(r.FinishReason), Usage: r.Usage, ToolCalls: r.ToolCalls}, age, nil
}
