// Command tracing replays a small incident through a backstop chain with
// OpenTelemetry tracing on, and exports the traces over OTLP/HTTP, so that
// the incident can be read afterwards in a tracing backend such as Jaeger.
//
// It runs against backstop's fake provider on loopback; no API key is needed:
//
//	go -C examples/tracing run .
//
// Spans go to http://localhost:4318 (OTLP/HTTP) unless
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT says
// otherwise. With nothing listening there the calls run all the same and
// the program says the spans were not exported. For each call it prints the
// path (every attempt, wait and skip), the trace id and the request-id of
// the answer: search Jaeger's UI (http://localhost:16686) for the tag
// backstop.request_id=<that id> to find the call's trace. How to run Jaeger
// locally: internal/tools/jaeger/README.md.
//
// The program is a module of its own so that the library's go.mod never
// requires the OTLP exporter.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
)

// The incident's cast.
const (
	serviceName = "backstop-example"
	chainName   = "support-answer"

	sonnet = "claude-sonnet-4-5"
	haiku  = "claude-haiku-4-5"

	primary    = "sonnet-eu-1" // sonnet on the first deployment
	deployment = "sonnet-eu-2" // sonnet on the second deployment
	sibling    = "haiku-eu"    // haiku on the first deployment

	jaegerUI = "http://localhost:16686"
)

// callRecord is one call of the incident, as the reader looks it up: the
// trace it was recorded in and how it ended.
type callRecord struct {
	Title   string
	TraceID trace.TraceID
	Result  *chain.Result
	Err     error
}

func main() {
	log.SetFlags(0)
	ctx := context.Background()

	exp, endpoint, err := newExporter(ctx)
	var tp trace.TracerProvider = noop.NewTracerProvider()
	var sdk *sdktrace.TracerProvider
	rep := &reportingExporter{SpanExporter: exp}
	if err != nil {
		fmt.Printf("Tracing is off: the OTLP exporter could not be set up: %v\n\n", err)
	} else {
		// Export failures are reported once, at the end, not logged as they happen.
		otel.SetErrorHandler(rep)
		sdk = sdktrace.NewTracerProvider(sdktrace.WithBatcher(rep), sdktrace.WithResource(exampleResource()))
		tp = sdk
	}

	records, runErr := run(ctx, tp, os.Stdout)

	if sdk != nil {
		// Flush: the batch processor holds the spans until now.
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		if err := sdk.Shutdown(sctx); err != nil {
			rep.Handle(err)
		}
		cancel()
		report(os.Stdout, rep, endpoint, records)
	}
	if runErr != nil {
		log.Fatal(runErr)
	}
}

// newExporter returns the OTLP/HTTP span exporter and where it sends: the
// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables when set, else
// http://localhost:4318.
func newExporter(ctx context.Context) (sdktrace.SpanExporter, string, error) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(k); v != "" {
			exp, err := otlptracehttp.New(ctx)
			return exp, v + " (" + k + ")", err
		}
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint("localhost:4318"), otlptracehttp.WithInsecure())
	return exp, "http://localhost:4318", err
}

// exampleResource names the service the spans come from.
func exampleResource() *resource.Resource {
	r, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", serviceName)))
	if err != nil {
		// Only a schema URL conflict can fail the merge; the service name
		// is what matters.
		return resource.NewSchemaless(attribute.String("service.name", serviceName))
	}
	return r
}

// run replays the incident on two fake Anthropic deployments, records each
// call in a trace of tp, prints each call's path to out, and returns the
// calls in order. The last call is the one to open: two attempts on the
// overloaded primary with a wait between them, the second deployment passed
// over, and the sibling model serving.
func run(ctx context.Context, tp trace.TracerProvider, out io.Writer) ([]callRecord, error) {
	eu1, eu2 := fake.New(), fake.New()
	for _, s := range []*fake.Server{eu1, eu2} {
		if err := s.Start(); err != nil {
			return nil, err
		}
		defer s.Close()
	}
	p1, err := anthropic.New(anthropic.Config{APIKey: "fake-key", BaseURL: eu1.URL()})
	if err != nil {
		return nil, err
	}
	p2, err := anthropic.New(anthropic.Config{APIKey: "fake-key", BaseURL: eu2.URL()})
	if err != nil {
		return nil, err
	}
	c, err := buildChain(tp, p1, p2)
	if err != nil {
		return nil, err
	}

	// Request ids unique to this run, so that a search in a long-lived
	// Jaeger finds this run's trace and no other.
	tag, seq := fmt.Sprintf("%06x", rand.Uint32()&0xffffff), 0
	id := func() string { seq++; return fmt.Sprintf("req_%s_%02d", tag, seq) }
	// The first 529 asks for 1 s, which the chain waits out; the second asks
	// for nothing (had it asked, the chain, moving on, would close the
	// primary's gate for that second and the next call would skip it).
	overloaded := func() fake.Outcome { return fake.Overloaded().RetryAfter("1").RequestID(id()) }
	overloadedNow := func() fake.Outcome { return fake.Overloaded().RequestID(id()) }

	tracer := tp.Tracer("github.com/backstop-llm/backstop/examples/tracing")
	var records []callRecord
	ask := func(title, question string) {
		fmt.Fprintf(out, "\n%d. %s\n   Q: %s\n", len(records)+1, title, question)
		r := call(ctx, tracer, c, question, out)
		r.Title = title
		records = append(records, r)
	}

	fmt.Fprintln(out, "Replaying an incident on backstop's fake provider, with OpenTelemetry tracing.")

	eu1.Script(sonnet, fake.Answer("It left the warehouse this morning.").RequestID(id()))
	ask("All is well: the primary answers.", "Where is my order?")

	eu1.Script(sonnet, overloaded(), overloadedNow())
	eu2.Script(sonnet, fake.RateLimited("45").RequestID(id()))
	eu1.Script(haiku, fake.Answer("Yes: reply with the new address.").RequestID(id()))
	ask("The primary is overloaded: two 529s, the first asking for 1 s, then the chain moves on. The second deployment is rate limited for 45 s, longer than the chain waits, so it is closed for that long. The sibling model answers.",
		"Can I change my delivery address?")

	eu1.Script(sonnet, overloaded(), overloadedNow())
	eu1.Script(haiku, fake.Answer("Within 30 days of delivery.").RequestID(id()))
	ask("Still overloaded: the primary fails twice again, with a wait between; the second deployment is passed over without a request (its Retry-After gate is closed); the sibling answers.",
		"How long do I have to return an item?")

	fmt.Fprintf(out, "\nRequests received: sonnet on eu-1 %d, sonnet on eu-2 %d, haiku on eu-1 %d.\n",
		eu1.Requests(sonnet), eu2.Requests(sonnet), eu1.Requests(haiku))
	for _, r := range records {
		if r.Err != nil {
			return records, fmt.Errorf("the incident did not play as scripted: %q failed: %w", r.Title, r.Err)
		}
	}
	return records, nil
}

// buildChain is the chain the incident runs: sonnet on two deployments,
// then haiku. The primary gets two attempts; the others the default three.
func buildChain(tp trace.TracerProvider, eu1, eu2 llm.Provider) (*chain.Chain, error) {
	fast := retry.Policy{Base: 200 * time.Millisecond, Pad: 300 * time.Millisecond}
	first := fast
	first.MaxAttempts = 2
	params := llm.Params{MaxTokens: 300}
	return chain.New(chainName).
		TracerProvider(tp).
		Deadline(30 * time.Second).
		Primary(chain.Target{Name: primary, Provider: eu1, Model: sonnet, Region: "eu", Retry: first, Params: params}).
		OrDeployment(chain.Target{Name: deployment, Provider: eu2, Model: sonnet, Region: "eu", Retry: fast, Params: params}).
		OrSibling(chain.Target{Name: sibling, Provider: eu1, Model: haiku, Region: "eu", Retry: fast, Params: params}).
		Build()
}

// call makes one call inside a span of the caller's own (as a request
// handler would), so that the trace id is known, and prints its path.
func call(ctx context.Context, tracer trace.Tracer, c *chain.Chain, question string, out io.Writer) callRecord {
	ctx, span := tracer.Start(ctx, "answer question")
	defer span.End()
	rec := callRecord{TraceID: span.SpanContext().TraceID()}

	start := time.Now()
	rec.Result, rec.Err = c.Call(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: question}}})
	elapsed := time.Since(start).Round(10 * time.Millisecond)
	for _, a := range rec.Result.Attempts {
		fmt.Fprintf(out, "   - %s\n", a)
	}
	if rec.Err != nil {
		span.RecordError(rec.Err)
		fmt.Fprintf(out, "   => failed after %v: %v\n   trace %s\n", elapsed, rec.Err, rec.TraceID)
		return rec
	}
	s := rec.Result.Served
	fmt.Fprintf(out, "   => served by %s (%s, %s, model %s) after %v\n   A: %s\n", s.Target, s.Tier, s.Provider, s.Model, elapsed, strings.TrimSpace(rec.Result.Text))
	fmt.Fprintf(out, "   trace %s, request-id %s: search Jaeger for the tag backstop.request_id=%s\n", rec.TraceID, s.RequestID, s.RequestID)
	return rec
}

// report says whether the spans reached the collector and how to find them.
func report(out io.Writer, rep *reportingExporter, endpoint string, records []callRecord) {
	exported, err := rep.status()
	if err != nil {
		fmt.Fprintf(out, "\nThe spans were not exported to %s: %v\n", endpoint, err)
		fmt.Fprintln(out, "The calls above ran all the same: a tracing backend that is down never fails a call.")
		fmt.Fprintln(out, "To read the traces, start Jaeger (see internal/tools/jaeger/README.md) and run this again.")
		return
	}
	fmt.Fprintf(out, "\nExported %d spans to %s.\n", exported, endpoint)
	if len(records) == 0 || records[len(records)-1].Result == nil {
		return
	}
	last := records[len(records)-1]
	id := last.Result.Served.RequestID
	fmt.Fprintf(out, "Open Jaeger's UI at %s, choose the service %s and search the tag\n   backstop.request_id=%s\n", jaegerUI, serviceName, id)
	fmt.Fprintf(out, "or go straight to %s/trace/%s: the call span, its three attempts and the wait between the first two.\n", jaegerUI, last.TraceID)
	fmt.Fprintf(out, "A Jaeger built from source has no UI, only its API:\n   curl -sG %s/api/traces --data-urlencode service=%s --data-urlencode 'tags={\"backstop.request_id\":\"%s\"}'\n",
		jaegerUI, serviceName, id)
}

// reportingExporter passes spans on to an exporter and remembers how many
// went through and the first failure, so that a collector that is down is
// reported once instead of failing the program or flooding its output. It
// is also the otel error handler.
type reportingExporter struct {
	sdktrace.SpanExporter

	mu       sync.Mutex
	exported int
	err      error
}

func (e *reportingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.exported += len(spans)
	} else if e.err == nil {
		e.err = err
	}
	return err
}

// Handle records an error the OpenTelemetry SDK reports (otel.ErrorHandler).
func (e *reportingExporter) Handle(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.err = err
	}
}

// status returns how many spans were exported and the first failure.
func (e *reportingExporter) status() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.exported, e.err
}
