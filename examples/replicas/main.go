// Command replicas shows what the replicas of one service gain when their
// chains share what they learn through Redis (chain.Builder.Shared, given
// redisstore.New's state on a go-redis client): circuit breakers,
// Retry-After gates and retry budgets.
//
// Several replicas (4 by default), each its own *chain.Chain built with the
// same name on one Redis and its own HTTP client, call one fake primary
// (sonnet, Anthropic's wire format), so that the fake's request counts are
// the provider's view of the whole fleet. A second fake (gpt-fallback,
// OpenAI's wire format) is the fallback provider, and a static answer the
// degradation. The program walks them through an incident and prints each
// call's path:
//
//  1. healthy: sonnet serves every call.
//  2. outage: sonnet answers 529 to every request. The first replica to
//     call it tries three times, its breaker opens, and it says so in
//     Redis; every other replica skips sonnet from its next call on,
//     without sending it a request ("open on another replica"), and
//     gpt-fallback serves.
//  3. gpt-fallback, now carrying all the traffic, answers a 429 with a
//     Retry-After of 120 s, longer than its policy waits (MaxRetryAfter,
//     30 s): the gate closes on every replica, and the calls that follow
//     get the degraded answer without sending gpt-fallback a request.
//  4. recovery: sonnet heals. Once the breaker's OpenFor (2 s here) has
//     passed, the other replicas still skip sonnet; the replica that opened
//     the breaker sends one probe, it succeeds, and from their next call on
//     the others use sonnet again.
//
// Then the same incident runs again in this process without Builder.Shared,
// and a summary compares the requests each provider received. Calls are
// made one at a time, round-robin over the replicas, a little more than
// chain.SharedConfig.Refresh's default (100ms) apart: a replica reads what the
// others published every Refresh, so what one call changes reaches every
// replica before the next call, and every run prints the same thing. It
// takes about 8 seconds, most of it the two OpenFor waits and those pauses.
//
//	go run ./examples/replicas
//	go run ./examples/replicas -replicas 8
//
// Redis is the server at $BACKSTOP_REDIS_ADDR (host:port), else at
// 127.0.0.1:6379, if it answers a PING within a second. When none answers,
// not even at an address given in $BACKSTOP_REDIS_ADDR, the program starts
// an in-process miniredis and says so in its first line, so that it runs
// on a machine with only Go: it is a demonstration, and the printed line
// tells you what it ran on. (A service would rather report the error; a
// shared chain whose Redis is down carries on with each replica's own
// state.) The keys are written under a prefix unique to the run and
// deleted at the end.
//
// The fakes are served in-process: no request leaves the process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"github.com/redis/go-redis/v9"
)

const (
	chainName = "support-answer"
	primary   = "sonnet" // the primary target's name
	fallback  = "gpt-fallback"
	sonnet    = "claude-sonnet-4-5" // the models the fakes serve
	gpt       = "gpt-4.1-mini"

	// failuresToOpen is the primary breaker's ConsecutiveFailures: one
	// call's three attempts open it.
	failuresToOpen = 3
	// retryAfter is the Retry-After of gpt-fallback's 429, in seconds:
	// longer than the policy's MaxRetryAfter (30s), so the chain does not
	// wait it out but closes the target's gate.
	retryAfter = "120"

	// envRedis and defaultRedis say where Redis is (as in the module's
	// integration tests).
	envRedis     = "BACKSTOP_REDIS_ADDR"
	defaultRedis = "127.0.0.1:6379"
	pingTimeout  = time.Second

	// between is the pause before each call: a Refresh, for the others'
	// pollers to read what the last call published (its replica's poller
	// writes it at once), and a margin for that read's round trip.
	between = 100*time.Millisecond + 10*time.Millisecond // the default Refresh, and a little
)

// options configure run.
type options struct {
	// Replicas is how many replicas call the primary; at least 1.
	Replicas int
	// RedisAddr is Redis's host:port; "" finds one (see findRedis).
	RedisAddr string
	// Prefix begins every Redis key; "" makes one unique to the run.
	Prefix string
	// OpenFor is the primary breaker's OpenFor; 0 means 2s, or longer
	// when the outage and rate-limit calls (3 per replica, between apart)
	// would not fit in it.
	OpenFor time.Duration
	// RedisTimeout is SharedConfig.Timeout; 0 means its default, 50ms.
	// The tests make it long: under a test's virtual clock a socket's
	// deadline is still real time, and a loaded machine can miss 50ms,
	// which would make a replica decide alone and change the counts.
	RedisTimeout time.Duration
}

func main() {
	log.SetFlags(0)
	var o options
	flag.IntVar(&o.Replicas, "replicas", 4, "how many replicas of the service call the primary")
	flag.Parse()
	if err := run(os.Stdout, o); err != nil {
		log.Fatal(err)
	}
}

// run plays the incident with sharing, prints it, plays it again without,
// and prints the summary.
func run(w io.Writer, o options) error {
	if o.Replicas < 1 || o.Replicas > 100 {
		return fmt.Errorf("-replicas is %d; use 1 to 100", o.Replicas)
	}
	if o.OpenFor == 0 {
		// The breaker must stay open through phases 2 and 3, whose calls
		// come between apart, with a second to spare.
		o.OpenFor = max(2*time.Second, (time.Duration(3*o.Replicas)*between + time.Second).Round(time.Second))
	}
	if o.Prefix == "" {
		o.Prefix = fmt.Sprintf("backstop-example-replicas:%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	ctx := context.Background()
	if o.RedisAddr == "" {
		addr, stop, err := findRedis(w)
		if err != nil {
			return err
		}
		defer stop()
		o.RedisAddr = addr
	} else {
		fmt.Fprintf(w, "Redis: %s.\n", o.RedisAddr)
	}
	fmt.Fprintf(w, "Redis keys: under %s, deleted at the end.\n", o.Prefix)
	fmt.Fprintf(w, "%d replicas of chain %q, each its own *chain.Chain, share breakers, gates and budgets there (Builder.Shared).\n",
		o.Replicas, chainName)
	fmt.Fprintf(w, "Targets: %s (%s, fake Anthropic API) -> %s (%s, fake OpenAI API) -> a static degraded answer.\n",
		primary, sonnet, fallback, gpt)
	fmt.Fprintf(w, "%s's breaker opens after %d consecutive failures and stays open %v; calls go one at a time, round-robin, %v apart.\n",
		primary, failuresToOpen, o.OpenFor, between)

	with, err := play(ctx, o, true)
	if err != nil {
		return err
	}
	with.print(w)
	without, err := play(ctx, o, false)
	if err != nil {
		return err
	}
	summarize(w, with, without)
	return nil
}

// findRedis returns the address of a Redis that answers a PING, or starts
// an in-process miniredis when none does; stop stops it.
func findRedis(w io.Writer) (addr string, stop func(), err error) {
	addr = os.Getenv(envRedis)
	from := "$" + envRedis
	if addr == "" {
		addr, from = defaultRedis, "the default address"
	}
	perr := ping(addr)
	if perr == nil {
		fmt.Fprintf(w, "Redis: %s (%s).\n", addr, from)
		return addr, func() {}, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return "", nil, fmt.Errorf("no Redis answers at %s (%v), and miniredis did not start: %w", addr, perr, err)
	}
	fmt.Fprintf(w, "Redis: no answer to a PING at %s (%s) within %v: %v\n", addr, from, pingTimeout, perr)
	fmt.Fprintf(w, "Redis: using an in-process miniredis at %s instead; set %s to the host:port of a real one.\n", m.Addr(), envRedis)
	return m.Addr(), m.Close, nil
}

// ping reports whether Redis at addr answers a PING within pingTimeout. A
// plain dial comes first, so that go-redis does not log its failure to
// connect when nothing listens.
func ping(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, pingTimeout)
	if err != nil {
		return err
	}
	_ = conn.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1, DialTimeout: pingTimeout, ContextTimeoutEnabled: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	return c.Ping(ctx).Err()
}

// phases of the incident.
var phases = [...]string{
	1: "healthy: " + primary + " serves every call",
	2: "outage: " + primary + " answers 529 overloaded to every request",
	3: fallback + ", now carrying all the traffic, answers 429 with Retry-After: " + retryAfter +
		" (its policy waits " + retry.Policy{}.WithDefaults().MaxRetryAfter.String() + " at most)",
	4: "recovery: " + primary + " is healthy again; replica 1 probes it after OpenFor",
}

// call is one call of one replica, as the providers and the chain saw it.
type call struct {
	phase, replica, n int // n counts the replica's calls, from 1
	res               *chain.Result
	err               error
	primary, fallback int             // requests each fake received during the call
	changes           []breaker.State // the replica's primary breaker changes during the call
}

// incident is one play of the scenario.
type incident struct {
	shared   bool
	replicas int
	openFor  time.Duration
	waited   time.Duration // how long phase 4 waited for OpenFor to pass
	calls    []call
}

// play runs the incident once: with Builder.Shared on o.RedisAddr, or
// without it.
func play(ctx context.Context, o options, shared bool) (_ *incident, err error) {
	prim, fb := fake.New(), fake.New()
	var primaryDown, fallbackLimited atomic.Bool
	prim.Handle(sonnet, func(fake.Call) fake.Outcome {
		if primaryDown.Load() {
			return fake.Overloaded()
		}
		return fake.Answer("Your order left the warehouse this morning.")
	})
	fb.Handle(gpt, func(fake.Call) fake.Outcome {
		if fallbackLimited.Load() {
			return fake.RateLimited(retryAfter)
		}
		return fake.Answer("Your order is on its way.")
	})

	// changes records each replica's primary breaker transitions, and when
	// the last one opened.
	var mu sync.Mutex
	changes := make([][]breaker.State, o.Replicas)
	var lastOpened time.Time

	fast := retry.Policy{Base: 20 * time.Millisecond, Cap: 100 * time.Millisecond}
	replicas := make([]*chain.Chain, o.Replicas)
	var clients []*redis.Client
	built := false // every replica built: clean up Redis at the end
	defer func() {
		if shared && built {
			if cerr := cleanUp(ctx, replicas, clients[0], o.Prefix); err == nil {
				err = cerr
			}
		}
		for _, r := range replicas {
			if r != nil {
				r.Close() // stops its poller, before its Redis client closes
			}
		}
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	for i := range replicas {
		b := chain.New(chainName).Deadline(10 * time.Second)
		if shared {
			// Each replica has its own Redis client, as separate processes
			// would. ContextTimeoutEnabled is required: the shared state
			// bounds each round trip by its context, and
			// redisstore.New refuses a client without it.
			c := redis.NewClient(&redis.Options{Addr: o.RedisAddr, ContextTimeoutEnabled: true})
			clients = append(clients, c)
			store, err := redisstore.New(c)
			if err != nil {
				return nil, err
			}
			b.Shared(store, chain.SharedConfig{Prefix: o.Prefix, Timeout: o.RedisTimeout})
		}
		// Each replica has its own adapters and HTTP clients; the fakes
		// behind them are shared by all.
		ant, err := anthropic.New(anthropic.Config{APIKey: "fake-key", BaseURL: prim.URL(), HTTPClient: prim.Client()})
		if err != nil {
			return nil, err
		}
		oai, err := openai.New(openai.Config{APIKey: "fake-key", BaseURL: fb.URL(), HTTPClient: fb.Client()})
		if err != nil {
			return nil, err
		}
		c, err := b.
			Primary(chain.Target{Name: primary, Provider: ant, Model: sonnet, Retry: fast, Params: llm.Params{MaxTokens: 300},
				Breaker: breaker.Config{ConsecutiveFailures: failuresToOpen, OpenFor: o.OpenFor,
					OnStateChange: func(_ string, _, to breaker.State) {
						mu.Lock()
						defer mu.Unlock()
						changes[i] = append(changes[i], to)
						if to == breaker.Open {
							lastOpened = time.Now()
						}
					}}}).
			OrProvider(chain.Target{Name: fallback, Provider: oai, Model: gpt, Retry: fast, Params: llm.Params{MaxTokens: 300}}).
			OrDegrade(degrade.Static(llm.Response{Text: "We're busy right now; a person will answer you shortly."})).
			Build()
		if err != nil {
			return nil, err
		}
		replicas[i] = c
	}
	built = true

	inc := &incident{shared: shared, replicas: o.Replicas, openFor: o.OpenFor}
	calls := make([]int, o.Replicas)
	// round makes one call on each replica, in order (0-based indexes).
	round := func(phase int, order []int) {
		for _, i := range order {
			time.Sleep(between)
			calls[i]++
			p0, f0 := prim.Requests(sonnet), fb.Requests(gpt)
			res, err := replicas[i].Call(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}})
			mu.Lock()
			ch := changes[i]
			changes[i] = nil
			mu.Unlock()
			inc.calls = append(inc.calls, call{phase: phase, replica: i + 1, n: calls[i], res: res, err: err,
				primary: prim.Requests(sonnet) - p0, fallback: fb.Requests(gpt) - f0, changes: ch})
		}
	}
	inOrder := make([]int, o.Replicas)
	for i := range inOrder {
		inOrder[i] = i
	}

	round(1, inOrder)
	round(1, inOrder)

	primaryDown.Store(true)
	round(2, inOrder)
	round(2, inOrder)

	fallbackLimited.Store(true)
	round(3, inOrder)

	primaryDown.Store(false)
	mu.Lock()
	// A shared breaker's opening lasts OpenFor and up to a quarter more
	// (so that replicas that opened together do not probe together): wait
	// for the longest it may last.
	wait := time.Until(lastOpened.Add(o.OpenFor+o.OpenFor/4)) + 50*time.Millisecond
	mu.Unlock()
	if wait > 0 {
		time.Sleep(wait)
		inc.waited = wait
	}
	// The others first, to show that they wait for the probe of the
	// replica whose breaker opened (replica 1), then everyone.
	round(4, append(inOrder[1:len(inOrder):len(inOrder)], 0))
	round(4, inOrder)
	return inc, nil
}

// cleanUp flushes what the replicas' budgets have not written yet, as a
// replica does before it stops, then deletes every key under prefix.
func cleanUp(ctx context.Context, replicas []*chain.Chain, c *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, r := range replicas {
		if err := r.Flush(ctx); err != nil {
			return fmt.Errorf("flushing the shared budgets: %w", err)
		}
	}
	var keys []string
	iter := c.Scan(ctx, 0, prefix+":*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("listing the keys under %s: %w", prefix, err)
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			return fmt.Errorf("deleting the keys under %s: %w", prefix, err)
		}
	}
	return nil
}

// print prints the incident's calls phase by phase, one line per run of
// consecutive calls whose paths read the same.
func (inc *incident) print(w io.Writer) {
	for p := 1; p < len(phases); p++ {
		fmt.Fprintf(w, "\nPhase %d  %s\n", p, phases[p])
		if p == 4 && inc.waited > 0 {
			fmt.Fprintf(w, "  (waited %v, until replica 1's breaker had been open for OpenFor and its jitter", inc.waited.Round(10*time.Millisecond))
			if inc.replicas > 1 {
				fmt.Fprintf(w, "; the others call first")
			}
			fmt.Fprintf(w, ")\n")
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		var group []call
		flush := func() {
			if len(group) == 0 {
				return
			}
			var rs, ns []int
			for _, c := range group {
				rs, ns = append(rs, c.replica), append(ns, c.n)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", label("replica", rs), label("call", ns), describe(group[0]))
			group = group[:0]
		}
		for _, c := range inc.calls {
			if c.phase != p {
				continue
			}
			if len(group) > 0 && describe(group[0]) != describe(c) {
				flush()
			}
			group = append(group, c)
		}
		flush()
		_ = tw.Flush()
	}
}

// label is "replica 2", "replicas 2-4", "calls 3-4", "replicas 1, 3".
func label(noun string, xs []int) string {
	slices.Sort(xs)
	xs = slices.Compact(xs)
	if len(xs) == 1 {
		return noun + " " + strconv.Itoa(xs[0])
	}
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && xs[j+1] == xs[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", xs[i], xs[j]))
		} else {
			parts = append(parts, strconv.Itoa(xs[i]))
		}
		i = j + 1
	}
	return noun + "s " + strings.Join(parts, ", ")
}

// describe renders a call's path on one line: what each target did, then
// what answered.
func describe(c call) string {
	var parts []string
	atts := c.res.Attempts
	for i := 0; i < len(atts); {
		if atts[i].Tier == chain.TierDegrade {
			i++ // the end says it
			continue
		}
		t := atts[i].Target
		j := i
		for j < len(atts) && atts[j].Target == t {
			j++
		}
		if s := describeTarget(t, atts[i:j], c); s != "" {
			parts = append(parts, s)
		}
		i = j
	}
	var end string
	switch {
	case c.err != nil:
		end = "failed: " + c.err.Error()
	case c.res.Degraded:
		end = "degraded answer"
	default:
		end = "served by " + c.res.Served.Target
	}
	if len(parts) == 0 {
		return end
	}
	return strings.Join(parts, ", ") + " -> " + end
}

// describeTarget renders what one target did in a call; "" for a target
// that answered at once, with nothing else to say.
func describeTarget(name string, atts []chain.Attempt, c call) string {
	var sent []string
	var notes []string
	for _, a := range atts {
		switch {
		case a.Decision == chain.DecisionSkip && a.N == 0:
			return name + " skipped (" + skipReason(a.Err, a.Reason) + ")"
		case a.Decision == chain.DecisionSkip:
			notes = append(notes, "retry not sent: "+skipReason(a.Err, a.Reason))
		default:
			s := strconv.Itoa(a.Status)
			if a.Status == 0 {
				s = a.Kind.String()
			}
			sent = append(sent, s)
			var le *llm.Error
			if errors.As(a.Err, &le) && le.RetryAfter > 0 && a.Decision == chain.DecisionNext {
				notes = append(notes, "Retry-After "+le.RetryAfter.String()+", gate closed")
			}
		}
	}
	probe := false
	if name == primary {
		for _, s := range c.changes {
			switch s {
			case breaker.Open:
				notes = append(notes, "breaker opened")
			case breaker.HalfOpen:
				probe = true
			case breaker.Closed:
				notes = append(notes, "breaker closed")
			}
		}
	}
	if len(notes) == 0 && !probe && len(sent) == 1 && sent[0] == "200" {
		return ""
	}
	s := name + " " + strings.Join(sent, " ")
	if probe {
		s = name + " probe " + strings.Join(sent, " ")
	}
	if len(notes) > 0 {
		s += ": " + strings.Join(notes, ", ")
	}
	return s
}

// skipReason says in a few words why a target or a retry was not sent.
func skipReason(err error, reason string) string {
	switch {
	case errors.Is(err, breaker.ErrOpenElsewhere):
		return "open on another replica"
	case errors.Is(err, breaker.ErrOpen):
		return "own breaker open"
	case errors.Is(err, breaker.ErrGateClosedElsewhere):
		return "gate closed by another replica's Retry-After"
	case errors.Is(err, breaker.ErrGateClosed):
		return "gate closed by its Retry-After"
	}
	return reason
}

// phaseTotals are the numbers of one phase of one play.
type phaseTotals struct {
	calls, primary, fallback, degraded int
}

func (inc *incident) totals() [len(phases)]phaseTotals {
	var t [len(phases)]phaseTotals // [0] is every phase
	for _, c := range inc.calls {
		for _, p := range []int{0, c.phase} {
			t[p].calls++
			t[p].primary += c.primary
			t[p].fallback += c.fallback
			if c.err == nil && c.res.Degraded {
				t[p].degraded++
			}
		}
	}
	return t
}

// summarize prints the requests each fake received per phase, with and
// without sharing, and what they show.
func summarize(w io.Writer, with, without *incident) {
	a, b := with.totals(), without.totals()
	fmt.Fprintf(w, "\nSummary: what the providers received, with Builder.Shared and without it\n")
	fmt.Fprintf(w, "(the same incident, played again in this process with Shared left out)\n\n")
	fmt.Fprintf(w, "  %-15s %5s  %19s  %21s  %19s\n", "", "", primary+" requests", fallback+" requests", "degraded answers")
	fmt.Fprintf(w, "  %-15s %5s  %8s %10s  %8s %12s  %8s %10s\n", "phase", "calls", "shared", "not shared", "shared", "not shared", "shared", "not shared")
	names := [...]string{"all", "1 healthy", "2 outage", "3 fallback 429", "4 recovery"}
	for _, p := range []int{1, 2, 3, 4, 0} {
		fmt.Fprintf(w, "  %-15s %5d  %8d %10d  %8d %12d  %8d %10d\n", names[p], a[p].calls,
			a[p].primary, b[p].primary, a[p].fallback, b[p].fallback, a[p].degraded, b[p].degraded)
	}

	n := with.replicas
	if n == 1 {
		fmt.Fprintf(w, "\nWith one replica there is no one to share with: run it with -replicas 4.\n")
		return
	}
	others := "replica 2"
	if n > 2 {
		others = fmt.Sprintf("replicas 2-%d", n)
	}
	fmt.Fprintf(w, "\nOutage: %s got %d requests with sharing, %d without: replica 1's breaker opened after %d, and %s\n",
		primary, a[2].primary, b[2].primary, failuresToOpen, others)
	fmt.Fprintf(w, "  skipped %s from their next call on instead of each failing %d times to open their own.\n", primary, failuresToOpen)
	fmt.Fprintf(w, "Rate limit: %s got %s with sharing, %d without: replica 1's 429 closed its gate on every replica.\n",
		fallback, plural(a[3].fallback, "request"), b[3].fallback)
	fmt.Fprintf(w, "Recovery: %s with sharing, %d without (each replica probes for itself).\n", plural(probes(with), "probe"), probes(without))
	if d := a[4].degraded - b[4].degraded; d > 0 {
		fmt.Fprintf(w, "  The price: %d calls of %s waited for replica 1's probe, and answered degraded meanwhile\n", d, others)
		fmt.Fprintf(w, "  (%s's gate still held), where without sharing each replica probed %s itself.\n", fallback, primary)
	}
}

// plural is "1 probe", "2 probes".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// probes counts the probes sent in the recovery.
func probes(inc *incident) int {
	k := 0
	for _, c := range inc.calls {
		if c.phase == 4 && slices.Contains(c.changes, breaker.HalfOpen) {
			k++
		}
	}
	return k
}
