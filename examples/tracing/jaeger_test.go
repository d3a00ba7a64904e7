//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/backstop-llm/backstop/chain"
)

const (
	// jaegerStartTimeout bounds the wait for Jaeger's query API and OTLP
	// receiver to answer.
	jaegerStartTimeout = 60 * time.Second
	// ingestTimeout bounds the wait for exported spans to become
	// searchable: Jaeger batches what it receives before storing it.
	ingestTimeout = 30 * time.Second
	// howToRun is printed when the test cannot get a Jaeger binary.
	howToRun = "To run this test: go -C internal/tools/jaeger build -o /tmp/jaeger github.com/jaegertracing/jaeger/cmd/jaeger\n" +
		"then: JAEGER_BIN=/tmp/jaeger go -C examples/tracing test -count=1 -v ./..."
)

// attemptWant is one request the incident's script makes a call send.
type attemptWant struct {
	target, model string
	n, status     int
}

// TestIncidentInJaeger replays the incident with its spans exported over
// OTLP/HTTP to a real Jaeger (v2, memory storage, loopback only), then finds
// each call's trace through Jaeger's query API by the provider's request-id,
// as a reader would in the UI, and checks that the trace tells the
// incident: the call span, one span per attempt sent, the waits between
// retries (as events and as gaps), the path from target to target, and the
// model that served.
func TestIncidentInJaeger(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Jaeger; skipped in -short mode")
	}
	j := startJaeger(t, jaegerBinary(t))

	ctx := t.Context()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+j.otlp+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	rep := &reportingExporter{SpanExporter: exp}
	// Synchronous: every span is sent as it ends, so all have left once
	// run returns.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(rep), sdktrace.WithResource(exampleResource()))
	begin := time.Now()
	records, runErr := run(ctx, tp, t.Output())
	if err := tp.Shutdown(ctx); err != nil {
		t.Errorf("shutting the tracer provider down: %v", err)
	}
	if runErr != nil {
		t.Fatal(runErr)
	}
	exported, err := rep.status()
	if err != nil {
		t.Fatalf("exporting spans to Jaeger at %s: %v (%d spans went through)\nJaeger's log:\n%s", j.otlp, err, exported, j.logTail())
	}

	wants := []struct {
		served   string
		tier     chain.Tier
		model    string
		attempts []attemptWant
		retries  int
		skipped  string // a target passed over by its Retry-After gate
	}{
		{served: primary, tier: chain.TierPrimary, model: sonnet,
			attempts: []attemptWant{{primary, sonnet, 1, 200}}},
		{served: sibling, tier: chain.TierSibling, model: haiku,
			attempts: []attemptWant{{primary, sonnet, 1, 529}, {primary, sonnet, 2, 529}, {deployment, sonnet, 1, 429}, {sibling, haiku, 1, 200}},
			retries:  1},
		{served: sibling, tier: chain.TierSibling, model: haiku,
			attempts: []attemptWant{{primary, sonnet, 1, 529}, {primary, sonnet, 2, 529}, {sibling, haiku, 1, 200}},
			retries:  1, skipped: deployment},
	}
	if len(records) != len(wants) {
		t.Fatalf("the incident made %d calls, want %d", len(records), len(wants))
	}
	for i, w := range wants {
		rec := records[i]
		t.Run(fmt.Sprintf("call%d", i+1), func(t *testing.T) {
			// First the script, from the Result: a failure here is the
			// incident's, not the traces'.
			res := rec.Result
			var sent []chain.Attempt
			for _, a := range res.Attempts {
				if a.Decision != chain.DecisionSkip {
					sent = append(sent, a)
				}
			}
			var got []attemptWant
			for _, a := range sent {
				got = append(got, attemptWant{a.Target, a.Model, a.N, a.Status})
			}
			if !slices.Equal(got, w.attempts) || res.Served.Target != w.served || res.Served.Model != w.model {
				t.Fatalf("the call did not play as scripted: sent %v, served by %s (%s), want %v served by %s (%s)",
					got, res.Served.Target, res.Served.Model, w.attempts, w.served, w.model)
			}

			// The trace, found by the request-id of the answer.
			tr := j.findTrace(t, res.Served.RequestID, begin)
			if tr.TraceID != rec.TraceID.String() {
				t.Fatalf("request-id %s found trace %s, want %s (the call's)", res.Served.RequestID, tr.TraceID, rec.TraceID)
			}
			root := tr.only(t, func(s jaegerSpan) bool { return s.OperationName == "answer question" })
			call := tr.only(t, func(s jaegerSpan) bool { return s.OperationName == "backstop.call "+chainName })
			if svc := tr.Processes[call.ProcessID].ServiceName; svc != serviceName {
				t.Errorf("call span's service is %q, want %q", svc, serviceName)
			}
			if p := call.parent(); p != root.SpanID {
				t.Errorf("call span's parent is %q, want the caller's span %q", p, root.SpanID)
			}
			call.wantTag(t, "span.kind", "internal")
			call.wantTag(t, "backstop.chain", chainName)
			call.wantTag(t, "backstop.served.target", w.served)
			call.wantTag(t, "backstop.served.tier", w.tier.String())
			call.wantTag(t, "backstop.served.request_id", res.Served.RequestID)
			call.wantTag(t, "gen_ai.response.model", w.model)
			call.wantTag(t, "backstop.attempts", int64(len(w.attempts)))
			call.wantTag(t, "backstop.degraded", false)

			// One CLIENT span per request sent, in order, under the call span.
			var spans []jaegerSpan
			for _, s := range tr.Spans {
				if strings.HasPrefix(s.OperationName, "chat ") {
					spans = append(spans, s)
				}
			}
			slices.SortFunc(spans, func(a, b jaegerSpan) int { return int(a.StartTime - b.StartTime) })
			if len(spans) != len(w.attempts) {
				t.Fatalf("%d attempt spans (%q...), want %d: %v", len(spans), "chat ", len(w.attempts), tr.names())
			}
			for k, s := range spans {
				a, want := sent[k], w.attempts[k]
				if name := "chat " + want.model; s.OperationName != name {
					t.Errorf("attempt %d is named %q, want %q", k+1, s.OperationName, name)
				}
				if p := s.parent(); p != call.SpanID {
					t.Errorf("attempt %d's parent is %q, want the call span %q", k+1, p, call.SpanID)
				}
				s.wantTag(t, "span.kind", "client")
				s.wantTag(t, "gen_ai.provider.name", "anthropic")
				s.wantTag(t, "gen_ai.request.model", want.model)
				s.wantTag(t, "backstop.target", want.target)
				s.wantTag(t, "backstop.attempt", int64(want.n))
				s.wantTag(t, "http.response.status_code", int64(want.status))
				s.wantTag(t, "backstop.request_id", a.RequestID)
				if want.n > 1 {
					s.wantTag(t, "http.request.resend_count", int64(want.n-1))
				}
				if want.status == 200 {
					s.wantTag(t, "gen_ai.response.model", w.model)
					s.wantTag(t, "backstop.tier", w.tier.String())
				} else {
					s.wantTag(t, "backstop.error.kind", a.Kind.String())
					if v, _ := s.tag("error.type"); v == nil || v == "" {
						t.Errorf("failed attempt %d (%s) has no %s", k+1, s.OperationName, "error.type")
					}
				}
			}

			// The waits: a retry event per retry, each at least the
			// Retry-After the 529 asked for, and the same gap between
			// the spans of the two attempts.
			retries := call.events("backstop.retry")
			if len(retries) != w.retries {
				t.Fatalf("%d %s events, want %d: %v", len(retries), "backstop.retry", w.retries, call.Logs)
			}
			for i, e := range retries {
				wait, _ := e.float("backstop.wait")
				after, _ := e.float("backstop.retry_after")
				if target, _ := e.get("backstop.target"); target != primary {
					t.Errorf("%s event for target %v, want %s", "backstop.retry", target, primary)
				}
				if wait <= 0 || wait < after || after != 1 {
					t.Errorf("%s event: %s = %vs, %s = %vs; want a wait > 0 and at least the retry-after of 1s",
						"backstop.retry", "backstop.wait", wait, "backstop.retry_after", after)
				}
				// The gap between the attempt that failed and the retry
				// (the retries are the primary's, its first spans).
				gap := time.Duration(spans[i+1].StartTime-(spans[i].StartTime+spans[i].Duration)) * time.Microsecond
				if want := time.Duration(wait * float64(time.Second)); gap < want-5*time.Millisecond {
					t.Errorf("the gap between the primary's attempts is %v, shorter than the %v wait recorded", gap, want)
				}
			}

			// The path: fallback events lead from the primary to the
			// target that served, each starting where the last ended, and
			// the call span counts them.
			fallbacks := call.events("backstop.fallback")
			call.wantTag(t, "backstop.fallbacks", int64(len(fallbacks)))
			from := primary
			if len(w.attempts) == 1 {
				from = ""
			}
			for _, e := range fallbacks {
				if f, _ := e.get("backstop.from"); f != from {
					t.Errorf("%s event from %v, want from %s: %v", "backstop.fallback", f, from, fallbacks)
				}
				to, _ := e.get("backstop.to")
				from, _ = to.(string)
			}
			if len(w.attempts) > 1 && from != w.served {
				t.Errorf("the %s events lead to %q, want to %s: %v", "backstop.fallback", from, w.served, fallbacks)
			}
			if w.skipped != "" {
				gates := call.events("backstop.gate.closed")
				if len(gates) != 1 {
					t.Fatalf("%d %s events, want 1 for %s: %v", len(gates), "backstop.gate.closed", w.skipped, call.Logs)
				}
				if target, _ := gates[0].get("backstop.target"); target != w.skipped {
					t.Errorf("%s event for %v, want %s", "backstop.gate.closed", target, w.skipped)
				}
			}

			// A request-id quoted for a failed attempt (a 529's, from the
			// provider's support, say) finds the same trace.
			if first := sent[0]; first.Status != 200 {
				if other := j.findTrace(t, first.RequestID, begin); other.TraceID != tr.TraceID {
					t.Errorf("request-id %s (a failed attempt) found trace %s, want %s", first.RequestID, other.TraceID, tr.TraceID)
				}
			}
		})
	}
}

// jaegerBinary returns the Jaeger v2 binary to run: $JAEGER_BIN, else one
// built from the pinned tools module (internal/tools/jaeger). When it cannot
// be had the test fails in CI and is skipped elsewhere.
func jaegerBinary(t *testing.T) string {
	if bin := os.Getenv("JAEGER_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("JAEGER_BIN=%s: %v", bin, err)
		}
		return bin
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		unavailable(t, "no go command to build Jaeger with: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "internal", "tools", "jaeger"))
	if err != nil {
		t.Fatal(err)
	}
	// Leave the test itself time to run within go test's -timeout.
	ctx := t.Context()
	if dl, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-2*time.Minute))
		defer cancel()
	}
	bin := filepath.Join(t.TempDir(), "jaeger")
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, "github.com/jaegertracing/jaeger/cmd/jaeger")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	t.Logf("building Jaeger in %s (set JAEGER_BIN to use a built one; a first build takes minutes)", dir)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: gave up after %v to leave the test time to run", err, time.Since(start).Round(time.Second))
		}
		unavailable(t, "cannot build Jaeger: %v\n%s", err, tail(out, 30))
	}
	t.Logf("built Jaeger in %v", time.Since(start).Round(time.Second))
	return bin
}

// unavailable ends the test for want of Jaeger: a failure in CI, a skip
// that says how to run it elsewhere.
func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s", msg)
	}
	t.Skipf("%s\n%s", msg, howToRun)
}

// jaeger is a running Jaeger: the addresses of its OTLP/HTTP receiver and
// query API, both on 127.0.0.1, and its log.
type jaeger struct {
	otlp, query string
	logPath     string
	client      *http.Client
}

// startJaeger runs bin with jaeger.yaml (memory storage; the OTLP/HTTP
// receiver and the query API only, on 127.0.0.1) on free ports, waits until
// it answers, and stops it, with its whole process group, when the test
// ends. Ports are picked free just before the start; should another process
// take one in between, it starts again on others.
func startJaeger(t *testing.T, bin string) *jaeger {
	config, err := filepath.Abs("jaeger.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for try := 1; ; try++ {
		ports := freePorts(t, 3)
		j := &jaeger{
			otlp: ports[0], query: ports[1],
			logPath: filepath.Join(dir, fmt.Sprintf("jaeger-%d.log", try)),
			client:  &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}},
		}
		logf, err := os.Create(j.logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "--config", "file:"+config)
		cmd.Dir = dir
		cmd.Env = append(withoutOTel(os.Environ()),
			"JAEGER_OTLP_HTTP="+ports[0], "JAEGER_QUERY_HTTP="+ports[1], "JAEGER_QUERY_GRPC="+ports[2])
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, logf, logf
		cmd.SysProcAttr = processGroup()
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatalf("starting Jaeger (%s): %v", bin, err)
		}
		exited := make(chan struct{}) // closed once Jaeger has exited and been reaped
		var waitErr error
		go func() { waitErr = cmd.Wait(); logf.Close(); close(exited) }()
		stopped := false
		stop := func() {
			if stopped {
				return
			}
			stopped = true
			stopProcessGroup(t, cmd.Process.Pid, exited)
		}
		t.Cleanup(stop)

		err = j.waitReady(exited, &waitErr)
		if err == nil {
			t.Logf("Jaeger (pid %d) is up: OTLP/HTTP on %s, query API on %s", cmd.Process.Pid, j.otlp, j.query)
			return j
		}
		stop()
		if try < 3 && strings.Contains(j.logTail(), "address already in use") {
			t.Logf("Jaeger lost a port to another process (%v); starting it again on others", err)
			continue
		}
		t.Fatalf("Jaeger did not start: %v\nJaeger's log (%s):\n%s", err, j.logPath, j.logTail())
	}
}

// waitReady waits until the query API answers and the OTLP receiver accepts
// connections (the receiver starts last), at most jaegerStartTimeout.
// waitErr is Jaeger's exit status once exited is closed.
func (j *jaeger) waitReady(exited <-chan struct{}, waitErr *error) error {
	deadline := time.Now().Add(jaegerStartTimeout)
	var last error
	for {
		select {
		case <-exited:
			return fmt.Errorf("it exited: %v", *waitErr)
		default:
		}
		last = j.ready()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", jaegerStartTimeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (j *jaeger) ready() error {
	resp, err := j.client.Get("http://" + j.query + "/api/services")
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /api/services: %s: %s", resp.Status, body)
	}
	c, err := net.DialTimeout("tcp", j.otlp, time.Second)
	if err != nil {
		return fmt.Errorf("OTLP receiver: %w", err)
	}
	return c.Close()
}

// logTail returns the end of Jaeger's log.
func (j *jaeger) logTail() string {
	b, err := os.ReadFile(j.logPath)
	if err != nil {
		return err.Error()
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "(empty)"
	}
	return tail(b, 40)
}

// findTrace returns the one trace of serviceName, started since begin,
// with a span tagged backstop.request_id=id, once it holds the caller's
// span (exported last) and the call span: the query the Jaeger UI makes
// for a search by tag. It retries until ingestTimeout, since Jaeger stores
// what it receives in batches.
func (j *jaeger) findTrace(t *testing.T, id string, begin time.Time) *jaegerTrace {
	t.Helper()
	tags, _ := json.Marshal(map[string]string{"backstop.request_id": id})
	q := url.Values{
		"service": {serviceName},
		"tags":    {string(tags)},
		"start":   {strconv.FormatInt(begin.Add(-time.Minute).UnixMicro(), 10)},
		"limit":   {"20"},
	}
	deadline := time.Now().Add(ingestTimeout)
	var last string
	for {
		q.Set("end", strconv.FormatInt(time.Now().Add(time.Minute).UnixMicro(), 10))
		traces, err := j.traces(q)
		switch {
		case err != nil:
			last = err.Error()
		case len(traces) > 1:
			t.Fatalf("the tag %s=%s finds %d traces, want 1", "backstop.request_id", id, len(traces))
		case len(traces) == 0:
			last = "no trace found"
		default:
			tr := &traces[0]
			if tr.has("answer question") && tr.has("backstop.call "+chainName) {
				return tr
			}
			last = fmt.Sprintf("trace %s incomplete so far: %v", tr.TraceID, tr.names())
		}
		if time.Now().After(deadline) {
			t.Fatalf("no trace for %s=%s in Jaeger after %v: %s\nJaeger's log:\n%s", "backstop.request_id", id, ingestTimeout, last, j.logTail())
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// traces runs a search on the query API (GET /api/traces).
func (j *jaeger) traces(q url.Values) ([]jaegerTrace, error) {
	resp, err := j.client.Get("http://" + j.query + "/api/traces?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces: %s: %s", resp.Status, bytes.TrimSpace(body))
	}
	var r struct {
		Data   []jaegerTrace `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("GET /api/traces: %w: %s", err, body)
	}
	if len(r.Errors) > 0 {
		return nil, fmt.Errorf("GET /api/traces: %v", r.Errors)
	}
	return r.Data, nil
}

// jaegerTrace is a trace as Jaeger's query API returns it (its JSON model:
// times in microseconds, attributes as tags, span events as logs whose
// "event" field is the event's name).
type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerProcess struct {
	ServiceName string `json:"serviceName"`
}

type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	StartTime int64       `json:"startTime"`
	Duration  int64       `json:"duration"`
	Tags      []jaegerKV  `json:"tags"`
	Logs      []jaegerLog `json:"logs"`
	ProcessID string      `json:"processID"`
}

type jaegerKV struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

type jaegerLog struct {
	Timestamp int64      `json:"timestamp"`
	Fields    []jaegerKV `json:"fields"`
}

func (tr *jaegerTrace) has(name string) bool {
	return slices.ContainsFunc(tr.Spans, func(s jaegerSpan) bool { return s.OperationName == name })
}

func (tr *jaegerTrace) names() []string {
	var names []string
	for _, s := range tr.Spans {
		names = append(names, s.OperationName)
	}
	return names
}

// only returns the one span that matches, failing the test unless there is
// exactly one.
func (tr *jaegerTrace) only(t *testing.T, match func(jaegerSpan) bool) jaegerSpan {
	t.Helper()
	var found []jaegerSpan
	for _, s := range tr.Spans {
		if match(s) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d matching spans in trace %s, want 1: %v", len(found), tr.TraceID, tr.names())
	}
	return found[0]
}

// parent returns the span's parent's id; "" for a root.
func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func (s jaegerSpan) tag(key string) (any, bool) { return lookup(s.Tags, key) }

// wantTag checks the span's tag key. want is a string, an int64 or a bool
// (Jaeger's JSON gives numbers as float64).
func (s jaegerSpan) wantTag(t *testing.T, key string, want any) {
	t.Helper()
	got, ok := s.tag(key)
	if !ok {
		t.Errorf("span %s has no tag %s (want %v)", s.OperationName, key, want)
		return
	}
	if n, isInt := want.(int64); isInt {
		want = float64(n)
	}
	if got != want {
		t.Errorf("span %s: %s = %v (%T), want %v", s.OperationName, key, got, got, want)
	}
}

// events returns the span's events (Jaeger logs) named name, in order.
func (s jaegerSpan) events(name string) []jaegerLog {
	var out []jaegerLog
	for _, l := range s.Logs {
		if v, _ := lookup(l.Fields, "event"); v == name {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b jaegerLog) int { return int(a.Timestamp - b.Timestamp) })
	return out
}

func (l jaegerLog) get(key string) (any, bool) { return lookup(l.Fields, key) }

func (l jaegerLog) float(key string) (float64, bool) {
	v, _ := l.get(key)
	f, ok := v.(float64)
	return f, ok
}

func (l jaegerLog) String() string {
	var b strings.Builder
	for i, f := range l.Fields {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%s=%v", f.Key, f.Value)
	}
	return "{" + b.String() + "}"
}

func lookup(kvs []jaegerKV, key string) (any, bool) {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

// freePorts returns n distinct free loopback addresses, held open together
// while they are picked.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs
}

// withoutOTel drops the OTEL_ variables from env: Jaeger is an
// OpenTelemetry program too, and must not follow the test's settings.
func withoutOTel(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, "OTEL_") })
}

// stopProcessGroup stops Jaeger and anything it started: SIGTERM to its
// process group, SIGKILL after 10 s, then SIGKILL to any member of the group
// still alive after Jaeger itself exited (the group's id cannot be reused
// while one is).
func stopProcessGroup(t *testing.T, pid int, exited <-chan struct{}) {
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Logf("stopping Jaeger: %v", err)
	}
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Logf("Jaeger did not stop within 10s of SIGTERM; killing it")
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	if err := syscall.Kill(-pid, 0); err == nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
