package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
)

// errHead begins every configuration problem of the package.
var errHead = problems.Head("agent: invalid configuration")

// ErrMaxTurns is matched by the error of a loop whose model still called
// tools in its MaxTurns-th turn. Those calls are not run; Run returns the
// Result so far, its Conversation ending before that turn.
var ErrMaxTurns = errors.New("agent: the model still calls tools after MaxTurns turns")

// The defaults of Config.
const (
	DefaultMaxTurns = 8
	DefaultKeep     = 24 * time.Hour
)

// Config configures a Loop. Chain is required; every other field has a
// default.
type Config struct {
	// Chain answers each turn. Its calls are validated against the
	// tools' schemas, re-asked and failed over as the chain does.
	Chain *chain.Chain
	// Tools are the tools the model may call, added to each request's
	// own Tools.
	Tools []Tool
	// MaxTurns is the most assistant turns a Run takes (asked, or
	// replayed from the ledger); 0 means DefaultMaxTurns.
	MaxTurns int
	// Ledger records the Once calls and the steps that made them; nil
	// means ledger.NewMemory(), which one process alone sees. Replicas
	// share a Redis ledger (redisstore).
	Ledger ledger.Ledger
	// Owner names this Loop in the ledger (a replica: a host name, a pod
	// name); "" means a random id, new for each Loop.
	Owner string
	// Keep is how long the ledger keeps a done step or call to replay;
	// 0 means DefaultKeep. A caller's retry after it runs the step anew.
	Keep time.Duration
}

// Validate reports every problem with c at once, each wrapping
// llm.ErrInvalidConfig: no Chain, a negative MaxTurns or Keep, an invalid
// tool (Tool.Validate), two tools of one name.
func (c Config) Validate() error {
	found := problems.New(errHead)
	if c.Chain == nil {
		found.Addf("Chain is nil; give the chain that answers each turn")
	}
	problems.NotNegative(found, "MaxTurns", c.MaxTurns, DefaultMaxTurns)
	problems.NotNegative(found, "Keep", c.Keep, DefaultKeep)
	seen := map[string]bool{}
	for _, t := range c.Tools {
		found.Add(t.Validate())
		if seen[t.Name] {
			found.Addf("two tools are named %q; give each its own name", t.Name)
		}
		seen[t.Name] = true
	}
	return found.Err()
}

// Loop runs tool loops over a chain. It is safe for concurrent use.
type Loop struct {
	chain    *chain.Chain
	tools    map[string]*Tool
	decl     []llm.Tool // what the model is told, in Config order
	maxTurns int
	led      ledger.Ledger
	owner    string
	keep     time.Duration
	once     bool // a tool is Once: steps are recorded
}

// New returns a Loop, or Validate's error.
func New(cfg Config) (*Loop, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l := &Loop{chain: cfg.Chain, tools: map[string]*Tool{}, maxTurns: cfg.MaxTurns, led: cfg.Ledger, owner: cfg.Owner, keep: cfg.Keep}
	if l.maxTurns == 0 {
		l.maxTurns = DefaultMaxTurns
	}
	if l.led == nil {
		l.led = ledger.NewMemory()
	}
	if l.owner == "" {
		var b [8]byte
		rand.Read(b[:])
		l.owner = "agent-" + hex.EncodeToString(b[:])
	}
	if l.keep == 0 {
		l.keep = DefaultKeep
	}
	for i := range cfg.Tools {
		t := cfg.Tools[i]
		l.tools[t.Name] = &t
		l.decl = append(l.decl, t.llm())
		l.once = l.once || t.Once
	}
	return l, nil
}

// Conversation is what a Run continues.
type Conversation struct {
	// ID names the conversation in the ledger; required when a tool is
	// Once. It names one conversation that only grows: a caller that
	// edits or removes earlier messages gives it a new ID (the keys are
	// places in the conversation).
	ID string
	// Request holds the messages so far, the system prompt and the
	// parameters. The loop adds its tools to Request.Tools.
	Request llm.Request
}

// Result is what a Run did.
type Result struct {
	// Text is the final answer (empty when the loop ended with an error).
	Text string
	// Steps are the assistant turns that called tools, in order.
	Steps []Step
	// Calls are the chain's results, one per model call (costs,
	// attempts, who served); a replayed step has none.
	Calls []*chain.Result
	// Conversation is the request to continue from: the messages up to
	// the final answer, or on an error up to the last step whose calls
	// were all answered. Store it with its ID.
	Conversation llm.Request
}

// Cost is what the model calls cost (the chain results' Cost added up).
func (r *Result) Cost() cost.Cost {
	var c cost.Cost
	for _, res := range r.Calls {
		c = c.Add(res.Cost())
	}
	return c
}

// Step is an assistant turn that called tools.
type Step struct {
	// Index is the step's place: the number of messages before its
	// assistant turn.
	Index int
	// Text is the text the model wrote along with its calls.
	Text string
	// Calls are the turn's calls and their results, in order.
	Calls []ToolRun
	// Replayed is true when the turn was read from the ledger (a
	// retried request, or another replica's concurrent one) rather than
	// asked of the model.
	Replayed bool
}

// ToolRun is one call and its result.
type ToolRun struct {
	Call Call
	// Output is the result sent to the model: the tool's JSON, or an
	// error's text when IsError.
	Output  string
	IsError bool
	// Replayed is true when a Once call's recorded result was sent and
	// the tool was not called.
	Replayed bool
	// Recovered is true when a Once call's outcome was unknown and its
	// tool's Recover answered it.
	Recovered bool

	err error // the tool's own error, when IsError
}

// Run runs the loop until the model answers without calling a tool. It
// returns the Result, partial with the error when the loop ended
// otherwise: the chain's error, ErrMaxTurns, a tool's error matching
// ErrStop, ErrDuplicate, the ledger's error (ledger.ErrUnavailable: no
// Once call runs without its ledger), or the context's.
func (l *Loop) Run(ctx context.Context, conv Conversation) (*Result, error) {
	return l.run(ctx, conv, nil)
}

// errGone ends a Stream whose consumer stopped reading.
var errGone = errors.New("agent: the stream's reader left")

// run is Run, and Stream when emit is set; emit returns false when the
// reader left.
func (l *Loop) run(ctx context.Context, conv Conversation, emit func(Event) bool) (*Result, error) {
	req := conv.Request
	req.Messages = slices.Clone(req.Messages)
	req.Tools = append(slices.Clone(req.Tools), l.decl...)
	res := &Result{Conversation: req}
	if l.once && conv.ID == "" {
		return res, fmt.Errorf("agent: Conversation.ID is empty; a Once tool's calls are keyed by it: give the conversation's own id")
	}
	for _, t := range conv.Request.Tools {
		if l.tools[t.Name] != nil {
			return res, fmt.Errorf("agent: the request declares a tool %q, which the loop runs; leave it out of Request.Tools", t.Name)
		}
	}
	say := func(ev Event) error {
		if emit != nil && !emit(ev) {
			return errGone
		}
		return nil
	}
	for turn := 0; ; turn++ {
		step := len(req.Messages)
		var said record
		replayed := false
		if l.once {
			rec, ok, err := l.recorded(ctx, conv.ID, step)
			if err != nil {
				return res, err
			}
			if ok {
				said, replayed = rec, true
				if err := sayText(say, said.Text, step); err != nil {
					return res, err
				}
			}
		}
		if !replayed {
			cres, err := l.ask(ctx, req, step, say)
			if cres != nil {
				res.Calls = append(res.Calls, cres)
			}
			if err != nil {
				return res, err
			}
			if len(cres.ToolCalls) == 0 {
				res.Text = cres.Text
				req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: cres.Text})
				res.Conversation = req
				return res, nil
			}
			said = record{Text: cres.Text}
			for _, c := range cres.ToolCalls {
				said.Calls = append(said.Calls, recordedCall{Name: c.Name, Arguments: c.Arguments})
			}
		}
		if turn >= l.maxTurns-1 {
			return res, fmt.Errorf("%w (%d)", ErrMaxTurns, l.maxTurns)
		}
		if l.once && !replayed {
			var took bool
			var err error
			if said, took, err = l.record(ctx, conv.ID, step, said); err != nil {
				return res, err
			}
			if took {
				// Another request recorded this step first: its calls
				// are the step's, and what was shown of ours is not.
				replayed = true
				if err := say(Event{Kind: Restart, Step: step}); err != nil {
					return res, err
				}
				if err := sayText(say, said.Text, step); err != nil {
					return res, err
				}
			}
		}
		st := Step{Index: step, Text: said.Text, Replayed: replayed}
		asked := llm.Message{Role: llm.RoleAssistant, Content: said.Text}
		calls := make([]Call, len(said.Calls))
		for i, c := range said.Calls {
			calls[i] = Call{ID: callID(step, i), Name: c.Name, Arguments: c.Arguments, Conversation: conv.ID, Step: step, Index: i}
			if t := l.tools[c.Name]; t != nil && t.Once {
				calls[i].Key = callKey(conv.ID, step, i)
			}
			asked.Parts = append(asked.Parts, llm.ToolCallPart(calls[i].ID, c.Name, c.Arguments))
		}
		runs, err := l.runStep(ctx, calls, say)
		if err != nil && !errors.Is(err, ErrStop) {
			return res, err
		}
		answered := llm.Message{Role: llm.RoleUser}
		for _, r := range runs {
			answered.Parts = append(answered.Parts, llm.ToolResultPart(r.Call.ID, r.Output, r.IsError))
		}
		st.Calls = runs
		res.Steps = append(res.Steps, st)
		req.Messages = append(req.Messages, asked, answered)
		res.Conversation = req
		if err != nil {
			return res, err
		}
	}
}

// sayText tells the reader the text of a step read from the ledger.
func sayText(say func(Event) error, text string, step int) error {
	if text == "" {
		return nil
	}
	return say(Event{Kind: Text, Text: text, Step: step})
}

// ask asks the chain for the next assistant turn: Call, or Stream when
// the loop streams. Stream's tool calls are taken from its Result once it
// ended, never from its chunks: only validated calls are run or shown.
func (l *Loop) ask(ctx context.Context, req llm.Request, step int, say func(Event) error) (*chain.Result, error) {
	if say == nil {
		return l.chain.Call(ctx, req)
	}
	s := l.chain.Stream(ctx, req)
	var gone error
	for ch, err := range s.Chunks() {
		if err != nil {
			break
		}
		switch {
		case ch.Restart:
			gone = say(Event{Kind: Restart, Step: step})
		case ch.Text != "":
			gone = say(Event{Kind: Text, Text: ch.Text, Step: step})
		}
		if gone != nil {
			break
		}
	}
	res, err := s.Result()
	if gone != nil {
		return res, gone
	}
	return res, err
}

// callID is the id of call i of step: the same whichever provider made
// it (letters, digits and _: every provider's id rules).
func callID(step, i int) string { return "call_" + strconv.Itoa(step) + "_" + strconv.Itoa(i) }

// stepKey is the ledger key of a conversation's step; callKey that of one
// of its calls. The conversation id is path-escaped, so that no id's
// slashes make two places one key.
func stepKey(conv string, step int) string {
	return url.PathEscape(conv) + "/" + strconv.Itoa(step)
}

func callKey(conv string, step, i int) string {
	return stepKey(conv, step) + "/" + strconv.Itoa(i)
}
