package storm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/retry"
)

// Defaults under fault: the library's defaults, a chain of an
// OpenAI-compatible primary and an Anthropic fallback with nothing set but
// their names, providers and models, against one fault a row: the faults of
// issue 24 and of the published crash test of LLM gateways. Each row runs in
// its own synctest bubble and holds each call to faultDeadline; it reports
// how the call ended, the requests each target received and the virtual
// time, and judges the row against its goal.

const (
	faultPrimaryModel  = "gpt-4o"
	faultFallbackModel = "claude-sonnet-4-5"
	// faultFallbackServed is the snapshot the fallback says served it,
	// and faultFallbackUsage its usage, for the row that checks that the
	// caller sees the fallback's model and usage.
	faultFallbackServed = "claude-sonnet-4-5-20250929"
	// faultDeadline bounds every call: a call that reaches it hung.
	faultDeadline = 5 * time.Minute
	// faultPrimaryText and faultFallbackText are each target's whole
	// answer; a call served anything else was served a truncated answer.
	faultPrimaryText  = "Your order 1042 left our warehouse on Monday and should reach you on Thursday."
	faultFallbackText = "Order 1042 shipped on Monday; delivery is expected on Thursday."
	// faultCutAfter is the chunks a stream sends before a mid-answer fault.
	faultCutAfter = 4
)

var faultFallbackUsage = llm.Usage{InputTokens: 1234, OutputTokens: 56}

// faultAsk is a conversation in OpenAI's terms that the fallback must get
// in Anthropic's: a system prompt and an earlier exchange.
var faultAsk = llm.Request{
	System: "You are the support agent of an online shop.",
	Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "Hello"},
		{Role: llm.RoleAssistant, Content: "Hello! How can I help?"},
		{Role: llm.RoleUser, Content: "Where is my order 1042?"},
	},
}

// The rows' names, which the row-specific checks refer to.
const (
	rowRetryAfter    = "429 with Retry-After (2s), once"
	rowPersistent429 = "429 without Retry-After, persistent"
	row500           = "500, once"
	row503           = "503, persistent"
	rowReset         = "connection reset before headers, once"
	rowSilent        = "no response at all (persistent)"
	rowFirstToken    = "first token after 20s (stream, persistent)"
	rowCut           = "stream cut mid-answer, once"
	rowStall         = "stream stalled 30s mid-answer, once"
	rowMalformed     = "one malformed event (stream, before the text)"
	rowNoDone        = "no [DONE]: finish_reason, clean end (stream)"
	rowContext       = "context length exceeded"
	rowFilter        = "content filter"
	rowPrefill       = "cut mid-answer; fallback rejects assistant prefill"
	rowRecovery      = "primary down 60s then healthy (20 calls, 1 per 4s)"
	rowAll503        = "every primary attempt 503, fallback answers"
)

// faultWant is the outcome a row must reach.
type faultWant uint8

const (
	wantServed             faultWant = iota // an answer, from either target
	wantPrimary                             // an answer from the primary
	wantFallback                            // an answer from the fallback
	wantIncomplete                          // ErrIncomplete: part of an answer, said to be part (RestartStreams is opt-in)
	wantIncompleteOrServed                  // either: ErrIncomplete, or the whole answer
	wantContentFilter                       // the filter's refusal, as KindContentFilter
)

// faultRow is one fault.
type faultRow struct {
	name   string
	stream bool
	// calls is the number of calls, one every every (1 call when 0).
	calls int
	every time.Duration
	// primary and fallback script the targets; start is the bubble's t=0.
	// A nil fallback answers faultFallbackText.
	primary  func(f *fake.Server, start time.Time)
	fallback func(f *fake.Server, start time.Time)
	want     faultWant
	// once: the primary must receive exactly one request (a failure
	// retrying the same model cannot help).
	once bool
	// within, when set, is the goal for each call's wall time.
	within time.Duration
	// check is the row's own goal, given what it did: what it adds to the
	// outcome, and why it failed ("" when it did not).
	check func(r faultRun) (detail, failed string)
}

// faultCall is what one call did.
type faultCall struct {
	began, ended time.Time
	text         string // what the caller received (after any Restart)
	res          *chain.Result
	err          error
}

func (c faultCall) took() time.Duration { return c.ended.Sub(c.began) }

// faultRun is what one row did.
type faultRun struct {
	start             time.Time
	calls             []faultCall
	primary, fallback int // requests each target received
	prefills          int // requests to the fallback ending in an assistant turn
}

// faultAnswer scripts model to answer text, with the served model and usage of
// the fallback when it is the fallback.
func faultAnswer(model, text string) fake.Outcome {
	o := fake.Answer(text)
	if model == faultFallbackModel {
		o = o.Model(faultFallbackServed).Usage(faultFallbackUsage.InputTokens, faultFallbackUsage.OutputTokens)
	}
	return o
}

// faultScript sets the primary to outcomes (the last one repeats).
func faultScript(outcomes ...fake.Outcome) func(f *fake.Server, start time.Time) {
	return func(f *fake.Server, _ time.Time) { f.Script(faultPrimaryModel, outcomes...) }
}

// faultPrimaryAnswer is the primary's whole answer, as a stream would send it.
func faultPrimaryAnswer() fake.Outcome { return faultAnswer(faultPrimaryModel, faultPrimaryText) }

// faultRows are the table's rows, in the order.
func faultRows() []faultRow {
	const malformed = `{"id":"chatcmpl-fake","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Your ord`
	return []faultRow{
		{name: rowRetryAfter, primary: faultScript(fake.RateLimited("2"), faultPrimaryAnswer()), want: wantServed},
		{name: rowPersistent429, primary: faultScript(fake.RateLimited("")), want: wantFallback},
		{name: row500, primary: faultScript(fake.ServerError(), faultPrimaryAnswer()), want: wantServed},
		{name: row503, primary: faultScript(fake.Overloaded()), want: wantFallback},
		{name: rowReset, primary: faultScript(fake.ConnReset(), faultPrimaryAnswer()), want: wantServed},
		{name: rowSilent, primary: faultScript(fake.Hang()), want: wantFallback, within: 35 * time.Second},
		{name: rowFirstToken, stream: true, primary: faultScript(faultPrimaryAnswer().FirstChunkAfter(20 * time.Second)),
			want: wantServed, within: 15 * time.Second},
		{name: rowCut, stream: true, primary: faultScript(faultPrimaryAnswer().Every(100*time.Millisecond).CutAfter(faultCutAfter), faultPrimaryAnswer()),
			want: wantIncomplete},
		{name: rowStall, stream: true,
			primary: faultScript(faultPrimaryAnswer().Every(100*time.Millisecond).PauseAfter(faultCutAfter, 30*time.Second), faultPrimaryAnswer()),
			want:    wantIncompleteOrServed},
		{name: rowMalformed, stream: true, primary: faultScript(faultPrimaryAnswer().MalformedEventAfter(0, malformed), faultPrimaryAnswer()),
			want: wantServed},
		{name: rowNoDone, stream: true, calls: 8, every: time.Second, primary: faultScript(faultPrimaryAnswer().NoSentinel()), want: wantPrimary,
			check: func(r faultRun) (string, string) {
				if r.primary != len(r.calls) {
					return "", fmt.Sprintf("%d requests to the primary for %d calls: a complete stream was taken for a failure", r.primary, len(r.calls))
				}
				return "", ""
			}},
		{name: rowContext, primary: faultScript(fake.ContextTooLong()), want: wantFallback, once: true},
		{name: rowFilter, primary: faultScript(fake.Status(400).Code("content_filter").
			Message("The response was filtered due to the prompt triggering Azure OpenAI's content management policy.")),
			want: wantContentFilter, once: true},
		{name: rowPrefill, stream: true, primary: faultScript(faultPrimaryAnswer().Every(100 * time.Millisecond).CutAfter(faultCutAfter)),
			fallback: func(f *fake.Server, _ time.Time) {
				f.Handle(faultFallbackModel, func(c fake.Call) fake.Outcome {
					if endsWithAssistant(c.Body) {
						return fake.BadRequest("This model does not support assistant message prefill. The conversation must end with a user message.")
					}
					return faultAnswer(faultFallbackModel, faultFallbackText)
				})
			},
			want: wantIncomplete,
			check: func(r faultRun) (string, string) {
				if r.prefills > 0 {
					return "", fmt.Sprintf("%d prefills sent to the fallback", r.prefills)
				}
				return "", ""
			}},
		{name: rowRecovery, calls: 20, every: 4 * time.Second,
			primary: func(f *fake.Server, start time.Time) {
				f.Handle(faultPrimaryModel, func(c fake.Call) fake.Outcome {
					if c.Time.Sub(start) < 60*time.Second {
						return fake.Overloaded()
					}
					return faultPrimaryAnswer()
				})
			},
			want:  wantServed,
			check: faultRecoveryCheck},
		{name: rowAll503, primary: faultScript(fake.Overloaded()), want: wantFallback,
			check: func(r faultRun) (string, string) {
				res := r.calls[0].res
				if r.calls[0].err != nil || res == nil {
					return "", ""
				}
				detail := fmt.Sprintf("model %s, usage %d+%d", res.Model, res.Usage.InputTokens, res.Usage.OutputTokens)
				switch {
				case res.Model != faultFallbackServed || res.Served.Model != faultFallbackServed:
					return detail, fmt.Sprintf("the caller sees model %q (served %q), want the fallback's %q", res.Model, res.Served.Model, faultFallbackServed)
				case res.Usage != faultFallbackUsage:
					return detail, fmt.Sprintf("the caller sees usage %+v, want the fallback's %+v", res.Usage, faultFallbackUsage)
				}
				return detail, ""
			}},
	}
}

// faultRecoveryCheck measures how soon after its recovery (t=60s) the primary
// served a call again; the goal is within 10s.
func faultRecoveryCheck(r faultRun) (string, string) {
	up := r.start.Add(60 * time.Second)
	for _, c := range r.calls {
		if c.err == nil && c.res.Served.Target == "primary" && !c.ended.Before(up) {
			back := c.ended.Sub(up)
			if back > 10*time.Second {
				return "primary back " + back.String() + " after recovery", "primary served again " + back.String() + " after recovering, goal 10s"
			}
			return "primary back " + back.String() + " after recovery", ""
		}
	}
	last := r.calls[len(r.calls)-1].ended.Sub(up)
	return "primary never back", fmt.Sprintf("primary not serving %v after recovering, goal 10s", last.Round(time.Second))
}

// endsWithAssistant reports whether an Anthropic request body's last
// message is the assistant's: a prefill.
func endsWithAssistant(body []byte) bool {
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return false
	}
	return req.Messages[len(req.Messages)-1].Role == "assistant"
}

// faultChain is the defaults: the OpenAI adapter as primary, the Anthropic
// adapter as fallback, both over f.
func faultChain(t testing.TB, f *fake.Server) *chain.Chain {
	t.Helper()
	gpt, err := openai.New(openai.Config{APIKey: "sk-storm-openai-0123456789", BaseURL: f.URL(), HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	claude, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-storm", BaseURL: f.URL(), HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	primary := chain.Target{Name: "primary", Provider: gpt, Model: faultPrimaryModel}
	fallback := chain.Target{Name: "fallback", Provider: claude, Model: faultFallbackModel}
	c, err := chain.New("defaults").Primary(primary).OrProvider(fallback).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// faultCallOnce makes one call, streamed or not, bounded by faultDeadline.
func faultCallOnce(ctx context.Context, c *chain.Chain, stream bool) faultCall {
	ctx, cancel := context.WithTimeout(ctx, faultDeadline)
	defer cancel()
	call := faultCall{began: time.Now()}
	if stream {
		s := c.Stream(ctx, faultAsk)
		var b strings.Builder
		for ch, err := range s.Chunks() {
			if err != nil {
				break
			}
			if ch.Restart {
				b.Reset()
			}
			b.WriteString(ch.Text)
		}
		call.res, call.err = s.Result()
		call.text = b.String()
	} else {
		call.res, call.err = c.Call(ctx, faultAsk)
		if call.res != nil && call.res.Response != nil {
			call.text = call.res.Text
		}
	}
	call.ended = time.Now()
	return call
}

// runFault runs row in a synctest bubble.
func runFault(t *testing.T, row faultRow) faultRun {
	var run faultRun
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		run.start = time.Now()
		row.primary(f, run.start)
		if row.fallback != nil {
			row.fallback(f, run.start)
		} else {
			f.Script(faultFallbackModel, faultAnswer(faultFallbackModel, faultFallbackText))
		}
		c := faultChain(t, f)
		defer c.Close()
		n := max(row.calls, 1)
		run.calls = make([]faultCall, n)
		arrivals(n, row.every, func(i int) { run.calls[i] = faultCallOnce(t.Context(), c, row.stream) })
		run.primary = f.Requests(faultPrimaryModel)
		run.fallback = f.Requests(faultFallbackModel)
		for _, call := range f.Calls(faultFallbackModel) {
			if endsWithAssistant(call.Body) {
				run.prefills++
			}
		}
	})
	return run
}

// judgeFault returns the row's outcome in words, its longest call's wall time,
// and why it missed its goal (none when it met it).
func judgeFault(row faultRow, r faultRun) (outcome string, wall time.Duration, failed []string) {
	byTarget := map[string]int{}
	var errs []string
	// A reason a call failed its goal, and the calls it applies to.
	var reasons []string
	calls := map[string]int{}
	miss := func(reason string) {
		if calls[reason] == 0 {
			reasons = append(reasons, reason)
		}
		calls[reason]++
	}
	for _, c := range r.calls {
		wall = max(wall, c.took())
		if c.took() >= faultDeadline {
			miss("hang: the call held to the " + faultDeadline.String() + " deadline")
			errs = append(errs, "hang")
			continue
		}
		if row.within > 0 && c.took() > row.within {
			miss(fmt.Sprintf("ended after %v, goal within %v", c.took().Round(time.Millisecond), row.within))
		}
		if c.err != nil {
			errs = append(errs, faultErrorWords(c.err))
			if f := faultErrorGoal(row.want, c); f != "" {
				miss(f)
			}
			continue
		}
		served := c.res.Served.Target
		byTarget[served]++
		whole := map[string]string{"primary": faultPrimaryText, "fallback": faultFallbackText}[served]
		if c.text != whole || c.res.Text != whole {
			miss(fmt.Sprintf("served %q from %s as complete, its whole answer is %q", c.text, served, whole))
		}
		switch {
		case row.want == wantPrimary && served != "primary",
			row.want == wantFallback && served != "fallback":
			miss("served by " + served)
		case row.want == wantIncomplete:
			miss("served by " + served + ", want the stream's failure (RestartStreams is opt-in)")
		case row.want == wantContentFilter:
			miss("served by " + served + ", want the content filter's refusal")
		}
	}
	for _, reason := range reasons {
		if len(r.calls) > 1 {
			reason = fmt.Sprintf("%d of %d calls: %s", calls[reason], len(r.calls), reason)
		}
		failed = append(failed, reason)
	}
	if row.once && r.primary != 1 {
		failed = append(failed, fmt.Sprintf("%d requests to the primary: the same model was retried", r.primary))
	}
	switch {
	case len(r.calls) == 1 && len(errs) == 0:
		for t := range byTarget {
			outcome = "served by " + t
		}
	case len(r.calls) == 1:
		outcome = errs[0]
	default:
		var parts []string
		for _, t := range []string{"primary", "fallback"} {
			if byTarget[t] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", byTarget[t], t))
			}
		}
		outcome = fmt.Sprintf("%d/%d served", len(r.calls)-len(errs), len(r.calls))
		if len(parts) > 0 {
			outcome += " (" + strings.Join(parts, ", ") + ")"
		}
		if len(errs) > 0 {
			outcome += "; failed: " + errs[0]
		}
	}
	if row.check != nil {
		detail, f := row.check(r)
		if detail != "" {
			outcome += "; " + detail
		}
		if f != "" {
			failed = append(failed, f)
		}
	}
	return outcome, wall, failed
}

// faultErrorWords names a failed call's error: incomplete (with its kind) or
// the kind, and its verdict.
func faultErrorWords(err error) string {
	kind := llm.KindOf(err).String()
	var ex *chain.ExhaustedError
	switch {
	case errors.Is(err, chain.ErrIncomplete):
		kind = "incomplete (" + kind + ")"
	case errors.As(err, &ex):
		kind = "exhausted (" + kind + ")"
	}
	return "error: " + kind + ", " + chain.VerdictOf(err).String()
}

// faultErrorGoal says why a failed call missed row's goal; "" when the failure
// is the one wanted.
func faultErrorGoal(w faultWant, c faultCall) string {
	var inc *chain.IncompleteError
	switch w {
	case wantIncomplete, wantIncompleteOrServed:
		if !errors.As(c.err, &inc) {
			return "failed with " + faultErrorWords(c.err) + ", want ErrIncomplete"
		}
		if inc.Partial == "" || inc.Partial != c.text || !strings.HasPrefix(faultPrimaryText, inc.Partial) {
			return fmt.Sprintf("incomplete with partial %q after receiving %q", inc.Partial, c.text)
		}
		return ""
	case wantContentFilter:
		if llm.KindOf(c.err) != llm.KindContentFilter || chain.VerdictOf(c.err) != retry.VerdictBadRequest {
			return "failed with " + faultErrorWords(c.err) + ", want the content filter's refusal (bad_request)"
		}
		return ""
	}
	return "not served: " + faultErrorWords(c.err)
}

func TestStormDefaultsUnderFault(t *testing.T) {
	rows := faultRows()
	runs := inParallel(t, len(rows), func(t *testing.T, i int) faultRun { return runFault(t, rows[i]) })

	tb := table{
		title: "Defaults under fault: an OpenAI-compatible primary and an Anthropic fallback, nothing configured, one fault a row",
		shows: "How each call ended, the requests each target received, the longest call's virtual time, and the row's goal.",
		head:  []string{"fault", "calls", "outcome", "primary requests", "fallback requests", "wall time", "verdict"},
	}
	for i, row := range rows {
		outcome, wall, failed := judgeFault(row, runs[i])
		verdict := "pass"
		if len(failed) > 0 {
			verdict = "FAIL: " + strings.Join(failed, "; ")
			t.Errorf("%s: %s", row.name, strings.Join(failed, "; "))
		}
		tb.row(row.name, len(runs[i].calls), outcome, runs[i].primary, runs[i].fallback, wall, verdict)
	}
	tb.note("The chain is chain.New(…).Primary(gpt-4o over provider/openai).OrProvider(claude-sonnet-4-5 over provider/anthropic),")
	tb.note("both on the fake provider, every Target field zero but Name, Provider and Model (the context windows, 128k and")
	tb.note("200k, come from the model catalogue). The conversation (a system prompt, an earlier")
	tb.note("exchange) crosses from OpenAI's wire format to Anthropic's when the fallback serves. Every call is bounded by a")
	tb.note("%v deadline; a call that reaches it hung. Stream rows call Stream; a mid-answer fault comes after %d chunks.", faultDeadline, faultCutAfter)
	tb.note("Goals: no row hangs; no call is served a truncated answer as complete (the text must equal the serving target's")
	tb.note("whole answer); a context-length or content-filter failure is not retried on the same model; every row a correct")
	tb.note("client can rescue is rescued (a stream cut after its first chunk ends in ErrIncomplete with its partial text:")
	tb.note("RestartStreams is opt-in). Measured: a silent primary is left for the fallback within 35s, a 20s first token is")
	tb.note("served within 15s, and the primary serves again within 10s of its recovery.")
	tb.print(t)
	writeFaultMarkdown(t, &tb)
}

// The markers between which STORM_MD's file holds the table.
const (
	faultMDBegin = "<!-- storm: defaults under fault -->"
	faultMDEnd   = "<!-- /storm: defaults under fault -->"
)

// writeFaultMarkdown replaces what lies between the markers in the file
// STORM_MD names (a relative path is taken from this package's directory)
// with tb as markdown, to refresh the docs:
//
//	STORM_MD=../../docs/performance.md go -C examples/storm test -run StormDefaults .
func writeFaultMarkdown(t *testing.T, tb *table) {
	writeMarkdown(t, tb, faultMDBegin, faultMDEnd)
}

// writeMarkdown replaces what lies between begin and end in the file
// STORM_MD names with tb as markdown; without STORM_MD it does nothing.
func writeMarkdown(t *testing.T, tb *table, begin, end string) {
	path := os.Getenv("STORM_MD")
	if path == "" {
		return
	}
	doc, err := os.ReadFile(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	i, j := bytes.Index(doc, []byte(begin)), bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		t.Fatalf("STORM_MD: %s has no %q … %q section to replace", path, begin, end)
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(begin)])
	b.WriteString("\n" + tb.markdown())
	b.Write(doc[j:])
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// markdown renders tb as a markdown table: the line it shows, the table,
// its notes as one paragraph. (Its title is the section's heading.)
func (tb *table) markdown() string {
	var b strings.Builder
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	b.WriteString(tb.shows + "\n\n|")
	for _, h := range tb.head {
		b.WriteString(" " + cell(h) + " |")
	}
	b.WriteString("\n|")
	for i := range tb.head {
		if markdownNumeric(tb.rows, i) {
			b.WriteString(" ---: |")
		} else {
			b.WriteString(" --- |")
		}
	}
	b.WriteString("\n")
	for _, r := range tb.rows {
		b.WriteString("|")
		for _, c := range r {
			b.WriteString(" " + cell(c) + " |")
		}
		b.WriteString("\n")
	}
	if len(tb.notes) > 0 {
		b.WriteString("\n" + strings.Join(tb.notes, "\n") + "\n")
	}
	return b.String()
}

// markdownNumeric reports whether column i of rows holds numbers or durations
// alone, which a markdown table aligns right.
func markdownNumeric(rows [][]string, i int) bool {
	for _, r := range rows {
		if _, err := strconv.ParseFloat(r[i], 64); err == nil {
			continue
		}
		if _, err := time.ParseDuration(r[i]); err != nil {
			return false
		}
	}
	return len(rows) > 0
}
