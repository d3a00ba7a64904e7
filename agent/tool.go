package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
)

// ErrStop ends the loop when a tool's error matches it (wrap it:
// fmt.Errorf("%w: the customer asked for a human", agent.ErrStop)). The
// step's other calls finish, the model is not asked again, and Run
// returns the Result with an error wrapping the tool's. Any other tool
// error goes back to the model as an error tool result.
var ErrStop = errors.New("agent: a tool stopped the loop")

// Call is one validated tool call, as a tool's Run or Recover receives it.
type Call struct {
	// ID is the call's id in the conversation: call_<step>_<index>,
	// whichever provider made it.
	ID string
	// Name is the tool called.
	Name string
	// Arguments is the JSON object of arguments, valid against the
	// tool's InputSchema.
	Arguments json.RawMessage
	// Conversation is Conversation.ID; Step the number of messages
	// before the assistant turn that made the call; Index the call's
	// position in that turn.
	Conversation string
	Step, Index  int
	// Key is the call's ledger key (Once tools): the same for every
	// repeat of this call, whatever the model's arguments. An idempotency
	// key to hand on to the service the tool calls (a payment API).
	Key string
}

type callCtx struct{}

// CallFrom returns the call a tool's Run or Recover is answering, from its
// context: a typed tool's way to read Call.Key (an idempotency key to
// hand on) or its place.
func CallFrom(ctx context.Context) (Call, bool) {
	c, ok := ctx.Value(callCtx{}).(Call)
	return c, ok
}

// RunFunc runs a tool call and returns its output as JSON.
type RunFunc func(ctx context.Context, c Call) (json.RawMessage, error)

// Duplicate says what a Once call does when another owner (another
// replica) holds its key and its lease is live.
type Duplicate uint8

// The duplicate modes.
const (
	// Wait (the default) polls the ledger until the other owner records
	// the result, which is then replayed, or its lease ends (outcome
	// unknown: Recover decides).
	Wait Duplicate = iota
	// Refuse ends the loop with an error matching ErrDuplicate: the
	// caller's other request is doing the work. (The model is not told:
	// it would call the tool again in its next turn, at a new place, under
	// a new key.)
	Refuse
)

// String returns "wait" or "refuse".
func (d Duplicate) String() string {
	switch d {
	case Wait:
		return "wait"
	case Refuse:
		return "refuse"
	}
	return fmt.Sprintf("Duplicate(%d)", uint8(d))
}

// ErrDuplicate is matched by the error of a loop whose Once call found
// its key held by another owner, with OnDuplicate Refuse.
var ErrDuplicate = errors.New("agent: a duplicate of the call is in progress")

// DefaultTimeout is a tool's Timeout when it sets none.
const DefaultTimeout = time.Minute

// Tool is a tool the loop runs: what the model is told (Name,
// Description, InputSchema) and the function that answers (Run). NewTool
// builds one from a typed Go function.
type Tool struct {
	// Name identifies the tool: letters, digits, _ and -, at most 64
	// bytes.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// InputSchema is the JSON Schema of the arguments (an object schema);
	// empty means an object with any properties. The chain validates
	// every call against it before the loop sees it.
	InputSchema json.RawMessage
	// Run answers a call. Its error goes back to the model as an error
	// tool result with the error's text, unless it matches ErrStop.
	Run RunFunc
	// Once marks a side effect: each call is keyed in the ledger and runs
	// at most once per key (see the package doc). Recover is required.
	Once bool
	// OnDuplicate is what a Once call does while another owner holds its
	// key: Wait (the default) or Refuse.
	OnDuplicate Duplicate
	// Recover answers a Once call whose outcome is unknown: it was
	// started and never recorded an end (its owner died, or Run timed
	// out). It must find out what happened (look the refund up by
	// Call.Key) and not blindly do it again; having found that nothing
	// was done, it may do it. Its result (or error) is recorded as the
	// call's. Required when Once.
	Recover RunFunc
	// Timeout bounds Run and Recover each; 0 means DefaultTimeout.
	Timeout time.Duration
	// Lease is how long a Once call holds its ledger key while it runs;
	// past it, the key is outcome unknown to the other replicas, and the
	// next request's Recover decides: a replica that died mid-call holds
	// its keys that long. 0 means twice Timeout plus 10 s (Run, then
	// Recover if Run timed out, then the ledger's round trips). A shorter
	// Lease recovers a dead replica's calls sooner, but must stay above
	// twice Timeout by the ledger's round trips and the process's pauses
	// (GC, CPU starvation): a call still running when its lease ends is
	// recovered by another replica while it runs. Negative, or not more
	// than twice Timeout, is an error.
	Lease time.Duration
	// Parallel lets the call run concurrently with the other Parallel
	// calls next to it in the same assistant turn.
	Parallel bool
}

// ToolConfig is a typed tool's settings (see NewTool): Tool's fields but
// Run and InputSchema.
type ToolConfig struct {
	Name        string
	Description string
	// Schema is the JSON Schema of the input; nil derives it from the
	// input type (github.com/google/jsonschema-go: exported fields by
	// their json names, required unless omitempty, a field's
	// `jsonschema:"..."` tag its description, additionalProperties false).
	Schema      json.RawMessage
	Once        bool
	OnDuplicate Duplicate
	Recover     RunFunc
	Timeout     time.Duration
	Lease       time.Duration
	Parallel    bool
}

// NewTool returns a tool that decodes a call's arguments into In, calls fn
// and encodes its Out as JSON. Its schema is cfg.Schema, or derived from
// In. It fails when the schema cannot be derived (In holds a channel, a
// function, an interface) or the tool is invalid (see Tool).
//
// Arguments that do not decode into In (the chain validated them against
// the schema, so a given Schema that disagrees with In) are an error
// result to the model.
func NewTool[In, Out any](cfg ToolConfig, fn func(ctx context.Context, in In) (Out, error)) (Tool, error) {
	schema := cfg.Schema
	if schema == nil {
		s, err := jsonschema.For[In](nil)
		if err != nil {
			return Tool{}, fmt.Errorf("%w: tool %q: the input schema cannot be derived from %v; give ToolConfig.Schema: %w", errHead, cfg.Name, reflect.TypeFor[In](), err)
		}
		if schema, err = json.Marshal(s); err != nil {
			return Tool{}, fmt.Errorf("%w: tool %q: the derived input schema does not encode: %w", errHead, cfg.Name, err)
		}
	}
	var run RunFunc
	if fn != nil {
		run = Func(fn)
	}
	t := Tool{Name: cfg.Name, Description: cfg.Description, InputSchema: schema, Run: run,
		Once: cfg.Once, OnDuplicate: cfg.OnDuplicate, Recover: cfg.Recover, Timeout: cfg.Timeout, Lease: cfg.Lease, Parallel: cfg.Parallel}
	if err := t.Validate(); err != nil {
		return Tool{}, err
	}
	return t, nil
}

// Func adapts a typed function to a RunFunc: a call's arguments decoded
// into In, fn's Out encoded as JSON. Use it for a typed Recover.
func Func[In, Out any](fn func(ctx context.Context, in In) (Out, error)) RunFunc {
	return func(ctx context.Context, c Call) (json.RawMessage, error) {
		var in In
		args := c.Arguments
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("the arguments do not decode: %w", err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

var toolName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// Validate reports every problem with t at once, each wrapping
// llm.ErrInvalidConfig: a name that is not 1 to 64 letters, digits, _ or
// -, no Run, Once without Recover, a negative Timeout, a negative Lease
// or one not more than twice Timeout, an unknown OnDuplicate, an
// InputSchema that is not JSON.
func (t Tool) Validate() error {
	found := problems.In(errHead, fmt.Sprintf("tool %q", t.Name))
	if !toolName.MatchString(t.Name) {
		found.Addf("Name must be 1 to 64 letters, digits, _ or - (the names every provider accepts)")
	}
	if t.Run == nil {
		found.Addf("Run is nil; give the function that answers a call")
	}
	if t.Once && t.Recover == nil {
		found.Addf("Once without Recover; give the function that finds out what a call whose outcome is unknown did (it must not blindly run it again)")
	}
	problems.NotNegative(found, "Timeout", t.Timeout, DefaultTimeout)
	problems.NotNegative(found, "Lease", t.Lease, "twice Timeout plus 10s")
	if t.Lease > 0 && t.Lease <= 2*t.timeout() {
		found.Addf("Lease is %v, not more than twice Timeout (%v): another replica would recover a call still running; raise Lease, or lower Timeout", t.Lease, t.timeout())
	}
	if t.OnDuplicate > Refuse {
		found.Addf("OnDuplicate is %v; use agent.Wait or agent.Refuse", t.OnDuplicate)
	}
	if len(t.InputSchema) > 0 && !json.Valid(t.InputSchema) {
		found.Addf("InputSchema is not JSON")
	}
	return found.Err()
}

// timeout is t's Timeout or the default.
func (t *Tool) timeout() time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	return DefaultTimeout
}

// leaseMargin is what a Once call's default lease adds to twice its
// Timeout.
const leaseMargin = 10 * time.Second

// lease is how long a Once call holds its key: Lease or the default.
func (t *Tool) lease() time.Duration {
	if t.Lease > 0 {
		return t.Lease
	}
	return 2*t.timeout() + leaseMargin
}

// llm returns what the model is told of t.
func (t *Tool) llm() llm.Tool {
	return llm.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}
}

// PanicError is the error of a loop whose tool panicked: the loop ends
// with it (it is not sent to the model), and a Once tool's key is left
// Started, its outcome unknown, for Recover to answer on the next
// request once its lease ends.
type PanicError struct {
	// Tool and Call name the tool and the call (its id in the
	// conversation).
	Tool, Call string
	// Value is what the tool panicked with; Stack the goroutine's stack
	// where it did.
	Value any
	Stack []byte
}

// Error says which tool panicked, and with what.
func (e *PanicError) Error() string {
	return fmt.Sprintf("agent: tool %q (call %s) panicked: %v", e.Tool, e.Call, e.Value)
}
