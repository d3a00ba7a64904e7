package storm

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
)

// The recovery: a chain whose only target is the primary, one call every
// recoveryEvery from the start; the primary answers 503 to everything
// from recoveryDown for the incident's length, then answers again. Calls
// go on for recoveryAfter past its recovery.
const (
	recoveryEvery = 100 * time.Millisecond
	recoveryDown  = 5 * time.Second
	recoveryAfter = 90 * time.Second
)

// todaysBreaker is the breaker as it was before the open interval grew: a
// fixed 30s. doublingBreaker is the defaults before issue 24: 5s, doubling
// after each failed probe up to 60s.
var (
	todaysBreaker   = breaker.Config{FirstOpenFor: 30 * time.Second, OpenFor: 30 * time.Second}
	doublingBreaker = breaker.Config{OpenFor: time.Minute}
)

// probe is the active probe of the rows that send one: one short message
// and a one-token answer.
var probe = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "ping"}}, Params: llm.Params{MaxTokens: 1}}

// recoveryRun is what one row did.
type recoveryRun struct {
	tally
	// back is how long after the primary's recovery a call was first
	// answered; -1 when none was before the run ended.
	back time.Duration
	// during is the requests the primary received during the outage,
	// probes the active probes among them.
	during, probes int
	// perMinute is the most requests the primary received in any minute
	// of the outage from 10s after it began (once the breaker is open).
	perMinute int
}

func recovery(t *testing.T, outage time.Duration, target chain.Target) recoveryRun {
	run := recoveryRun{back: -1}
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		start := time.Now()
		down, up := start.Add(recoveryDown), start.Add(recoveryDown+outage)
		f.Handle(primaryModel, func(c fake.Call) fake.Outcome {
			if !c.Time.Before(down) && c.Time.Before(up) {
				return fake.Status(503)
			}
			return fake.Answer("ok")
		})
		c := build(t, f, target, false)
		defer c.Close()
		var mu sync.Mutex
		arrivals(int((recoveryDown+outage+recoveryAfter)/recoveryEvery), recoveryEvery, func(int) {
			_, err := c.Call(t.Context(), ask)
			mu.Lock()
			defer mu.Unlock()
			if !run.add(err) {
				return
			}
			if now := time.Now(); !now.Before(up) && run.back < 0 {
				run.back = now.Sub(up)
			}
		})
		var open []time.Time
		for _, call := range f.Calls(primaryModel) {
			if call.Time.Before(down) || !call.Time.Before(up) {
				continue
			}
			if call.Time.Sub(down) >= 10*time.Second {
				open = append(open, call.Time)
			}
			run.during++
			var body struct {
				MaxTokens int `json:"max_tokens"`
			}
			if json.Unmarshal(call.Body, &body) == nil && body.MaxTokens == probe.Params.MaxTokens {
				run.probes++
			}
		}
		run.perMinute = maxInWindow(open, time.Minute)
	})
	return run
}

func TestStormRecovery(t *testing.T) {
	tb := table{
		title: fmt.Sprintf("Recovery: one call every %v to a chain of the primary alone; the primary answers 503 from t=%v, for 1s, then for 5m",
			recoveryEvery, recoveryDown),
		shows: "Calls failed, how soon after the primary's recovery it serves a call again, and the requests it saw while down, by breaker.",
		head:  []string{"incident", "breaker", "calls", "failed", "served again after recovery", "requests while down", "of which probes", "most a minute once open"},
	}
	type row struct {
		incident string
		outage   time.Duration
		breaker  string
		target   chain.Target
	}
	var rows []row
	for _, in := range []struct {
		name   string
		outage time.Duration
	}{{"1s blip", time.Second}, {"5m outage", 5 * time.Minute}} {
		rows = append(rows,
			row{in.name, in.outage, "earlier (30s fixed)", chain.Target{Breaker: todaysBreaker}},
			row{in.name, in.outage, "earlier defaults (5s doubling to 60s)", chain.Target{Breaker: doublingBreaker}},
			row{in.name, in.outage, "defaults (5s fixed)", chain.Target{}},
			row{in.name, in.outage, "defaults, active probe", chain.Target{Probe: probe}},
		)
	}
	const blipToday, blipDoubling, blipNew, blipProbe, longToday, longDoubling, longNew, longProbe = 0, 1, 2, 3, 4, 5, 6, 7
	runs := inParallel(t, len(rows), func(t *testing.T, i int) recoveryRun { return recovery(t, rows[i].outage, rows[i].target) })
	for i, r := range rows {
		run := runs[i]
		back := "never"
		if run.back >= 0 {
			back = run.back.Round(time.Millisecond).String()
		}
		tb.row(r.incident, r.breaker, run.calls, run.failed, back, run.during, run.probes, run.perMinute)
	}
	tb.note("Every row has the default retries (3 attempts, full jitter from 500ms) and ratio budget; the breaker opens on half")
	tb.note("of at least 20 attempts in 30s, or after 5 consecutive failures while the window holds fewer. The earlier rows are")
	tb.note("breaker.Config{FirstOpenFor: 30s, OpenFor: 30s} and {OpenFor: 60s} (the defaults before issue 24: 5s, doubling after")
	tb.note("each failed probe up to 60s); the defaults open for a fixed 5s. Without an active probe the first call after the")
	tb.note("open interval is the probe; with one (Target.Probe: one short message, MaxTokens 1) a timer sends it and calls are")
	tb.note("refused until it succeeds. Served again: from the primary's recovery to the first call answered after it (calls")
	tb.note("arrive every %v, so it is measured to that grain). Requests while down count every request that reached the", recoveryEvery)
	tb.note("primary during the outage: the failures that opened the breaker, the retries, the probes; of which probes counts")
	tb.note("the active probe's requests only (without one, the probes are users' calls). Most a minute once open counts the")
	tb.note("requests in any minute of the outage from 10s after it began: the probing rate, at most 12 a minute (one per 5s).")
	today, doubling, fixed := runs[longToday], runs[longDoubling], runs[longNew]
	tb.note("The 5m outage shows the trade: the doubling interval sent %d requests to the dead primary and today's fixed 30s %d,",
		doubling.during, today.during)
	tb.note("but they served again %v and %v after the recovery; the fixed 5s sent %d and served again %v after it.",
		doubling.back.Round(time.Millisecond), today.back.Round(time.Millisecond), fixed.during, fixed.back.Round(time.Millisecond))
	tb.print(t)

	for _, i := range []int{blipNew, blipProbe} {
		if b := runs[i].back; b < 0 || b > 10*time.Second {
			t.Errorf("1s blip, %s: the primary served again %v after recovering, want within 10s", rows[i].breaker, b)
		}
	}
	for _, i := range []int{longNew, longProbe} {
		if b := runs[i].back; b < 0 || b > 10*time.Second {
			t.Errorf("5m outage, %s: the primary served again %v after recovering, want within 10s", rows[i].breaker, b)
		}
		if n := runs[i].perMinute; n > 12 {
			t.Errorf("5m outage, %s: %d requests reached the dead primary in one minute once its breaker was open, want at most 12 (one probe per 5s)", rows[i].breaker, n)
		}
	}
}
