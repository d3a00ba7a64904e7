package observe

import (
	"context"
	"log/slog"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/spread"
)

// Log returns an Observer that writes a chain's events to logger (nil:
// slog.Default() at the time of each record), one record per event, all
// with the attribute chain:
//
//   - "backstop: call" when a call ends: Info when a target answered,
//     Warn when a degradation did or nothing did (outcome, served target,
//     tier, model, request_id, attempts, cost, error);
//   - "backstop: attempt" when an attempt ends: Debug on success or a
//     hedged race lost, Info on a failure (target, tier, n, status, kind,
//     request_id, duration, cost, error; choice when a spreading strategy
//     chose the target, hedge and lost for a hedged race);
//   - "backstop: hedge" (Info: from, to, after) when a hedge is sent;
//   - "backstop: retry" (Info: target, n, kind, wait, retry_after,
//     reason), "backstop: skip" (Info: target, n, cause, reason),
//     "backstop: fallback" (Warn: from, to, reason), "backstop: gate
//     closed" (Warn: target, until), "backstop: answer failed its schema"
//     (Warn: target, paths, keywords);
//   - "backstop: breaker" (Warn when it opens, Info otherwise: target,
//     from, to) and "backstop: shared store unavailable" (Warn).
//
// cost is what the attempt, or the call's attempts together, cost
// ("$0.0042"; a degradation's attempt has none), with unpriced=true when
// some tokens had no known price (cost is then what the known prices
// account for, and is left out when none had one: an unknown cost never
// reads as $0), estimated=true when some tokens were estimated (a
// stream cut short, a hedge that lost its race), and cache_lost, the part
// of cost that leaving a conversation's warm prompt cache added, when
// there is one.
//
// It logs no prompt and no answer: an error's text never quotes them (an
// llm.Error keeps the provider's own words in Detail, which it does not
// log). Records are built only when logger is enabled at their level.
func Log(logger *slog.Logger) Observer { return &logObserver{logger: logger} }

// logObserver holds nothing per chain: one may observe many chains.
type logObserver struct {
	logger *slog.Logger
}

var _ StateObserver = (*logObserver)(nil)

func (o *logObserver) log() *slog.Logger {
	if o.logger != nil {
		return o.logger
	}
	return slog.Default()
}

func (o *logObserver) StartCall(ctx context.Context, e CallStart) (context.Context, Call) {
	l := o.log()
	if !l.Enabled(ctx, slog.LevelDebug) && !l.Enabled(ctx, slog.LevelInfo) && !l.Enabled(ctx, slog.LevelWarn) {
		return ctx, nil
	}
	return ctx, &logCall{ctx: ctx, l: l, chain: slog.String("chain", e.Chain)}
}

func (o *logObserver) Event(e Event) {
	switch e := e.(type) {
	case BreakerChange:
		o.breakerChanged(e)
	case SharedUnavailable:
		o.sharedUnavailable(e)
	}
}

func (o *logObserver) breakerChanged(e BreakerChange) {
	level := slog.LevelInfo
	if e.To == "open" {
		level = slog.LevelWarn
	}
	o.log().LogAttrs(context.Background(), level, "backstop: breaker", slog.String("chain", e.Chain),
		slog.String("target", e.Target.Name), slog.String("from", e.From), slog.String("to", e.To))
}

func (o *logObserver) sharedUnavailable(e SharedUnavailable) {
	attrs := []slog.Attr{slog.String("chain", e.Chain), slog.String("store", e.Store)}
	if e.Target != "" {
		attrs = append(attrs, slog.String("target", e.Target))
	}
	o.log().LogAttrs(context.Background(), slog.LevelWarn, "backstop: shared store unavailable", attrs...)
}

// logCall logs one call's events.
type logCall struct {
	ctx   context.Context
	l     *slog.Logger
	chain slog.Attr
}

func (c *logCall) emit(level slog.Level, msg string, attrs ...slog.Attr) {
	if !c.l.Enabled(c.ctx, level) {
		return
	}
	c.l.LogAttrs(c.ctx, level, msg, append([]slog.Attr{c.chain}, attrs...)...)
}

func (c *logCall) StartAttempt(ctx context.Context, e AttemptStart) (context.Context, Attempt) {
	if e.Hedge {
		c.emit(slog.LevelInfo, "backstop: hedge", slog.String("from", e.HedgeOf), slog.String("to", e.Target.Name),
			slog.Duration("after", e.HedgeDelay.Round(time.Millisecond)))
	}
	return ctx, &logAttempt{c: c, target: e.Target, n: e.N, choice: e.Choice, hedge: e.Hedge}
}

func (c *logCall) Event(e Event) {
	switch e := e.(type) {
	case Retry:
		c.retry(e)
	case Skip:
		c.emit(slog.LevelInfo, "backstop: skip", slog.String("target", e.Target.Name), slog.Int("n", e.N),
			slog.String("cause", e.Cause.String()), slog.String("reason", e.Reason))
	case Fallback:
		c.emit(slog.LevelWarn, "backstop: fallback", slog.String("from", e.From.Name), slog.String("to", e.To.Name),
			slog.String("reason", e.Reason))
	case GateClosed:
		c.emit(slog.LevelWarn, "backstop: gate closed", slog.String("target", e.Target.Name),
			slog.Time("until", e.Until.UTC().Round(time.Millisecond)))
	case ValidationFailed:
		c.emit(slog.LevelWarn, "backstop: answer failed its schema", slog.String("target", e.Target.Name),
			slog.Any("paths", e.Paths), slog.Any("keywords", e.Keywords))
	case SharedLocal:
		c.emit(slog.LevelDebug, "backstop: shared state unavailable, deciding locally")
	}
}

func (c *logCall) retry(e Retry) {
	attrs := []slog.Attr{slog.String("target", e.Target.Name), slog.Int("n", e.N), slog.String("kind", e.Kind.String()),
		slog.Duration("wait", e.Wait.Round(time.Millisecond))}
	if e.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", e.RetryAfter))
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	c.emit(slog.LevelInfo, "backstop: retry", attrs...)
}

func (c *logCall) End(e CallEnd) {
	level := slog.LevelInfo
	if e.Outcome != "served" {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("outcome", e.Outcome), slog.Int("attempts", e.Attempts)}
	if e.Served != nil {
		attrs = append(attrs, slog.String("served", e.Served.Name), slog.String("tier", e.Served.Tier))
		if e.Model != "" {
			attrs = append(attrs, slog.String("model", e.Model))
		}
		if e.RequestID != "" {
			attrs = append(attrs, slog.String("request_id", e.RequestID))
		}
	}
	if e.Stream != "" {
		attrs = append(attrs, slog.String("stream", e.Stream))
	}
	attrs = appendCost(attrs, e.Cost)
	if e.Err != nil {
		attrs = append(attrs, slog.String("error_type", e.ErrorType), slog.String("error", e.Err.Error()))
	}
	c.emit(level, "backstop: call", attrs...)
}

// logAttempt logs one attempt's end.
type logAttempt struct {
	c      *logCall
	target Target
	n      int
	choice *spread.Choice
	hedge  bool
}

func (a *logAttempt) Event(Event) {}

func (a *logAttempt) End(e AttemptEnd) {
	level := slog.LevelDebug
	if e.Err != nil && !e.Lost {
		level = slog.LevelInfo
	}
	attrs := []slog.Attr{slog.String("target", e.Target.Name), slog.String("tier", e.Target.Tier), slog.Int("n", e.N)}
	if a.choice != nil {
		attrs = append(attrs, slog.String("choice", a.choice.String()))
	}
	if a.hedge {
		attrs = append(attrs, slog.Bool("hedge", true))
	}
	if e.Lost {
		attrs = append(attrs, slog.Bool("lost", true))
	}
	if e.Status != 0 {
		attrs = append(attrs, slog.Int("status", e.Status))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("kind", e.Kind.String()))
	}
	if id := e.ProviderRequestID(); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	attrs = append(attrs, slog.Duration("duration", e.Duration.Round(time.Microsecond)))
	if e.Target.Provider != "" { // a degradation costs nothing
		attrs = appendCost(attrs, e.Cost)
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	a.c.emit(level, "backstop: attempt", attrs...)
}

// appendCost appends c as cost, with unpriced and estimated when so; cost
// is left out when no token had a known price.
func appendCost(attrs []slog.Attr, c cost.Cost) []slog.Attr {
	if c.Spent != 0 || !c.Unpriced {
		attrs = append(attrs, slog.String("cost", c.Spent.String()))
	}
	if c.Unpriced {
		attrs = append(attrs, slog.Bool("unpriced", true))
	}
	if c.Estimated {
		attrs = append(attrs, slog.Bool("estimated", true))
	}
	if c.CacheLost != 0 {
		attrs = append(attrs, slog.String("cache_lost", c.CacheLost.String()))
	}
	return attrs
}
