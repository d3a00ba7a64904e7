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
// fixed 30s.
var todaysBreaker = breaker.Config{FirstOpenFor: 30 * time.Second, OpenFor: 30 * time.Second}

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
		for _, call := range f.Calls(primaryModel) {
			if call.Time.Before(down) || !call.Time.Before(up) {
				continue
			}
			run.during++
			var body struct {
				MaxTokens int `json:"max_tokens"`
			}
			if json.Unmarshal(call.Body, &body) == nil && body.MaxTokens == probe.Params.MaxTokens {
				run.probes++
			}
		}
	})
	return run
}

func TestStormRecovery(t *testing.T) {
	tb := table{
		title: fmt.Sprintf("Recovery: one call every %v to a chain of the primary alone; the primary answers 503 from t=%v, for 1s, then for 5m",
			recoveryEvery, recoveryDown),
		shows: "Calls failed, how soon after the primary's recovery it serves a call again, and the requests it saw while down, by breaker.",
		head:  []string{"incident", "breaker", "calls", "failed", "served again after recovery", "requests while down", "of which probes"},
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
			row{in.name, in.outage, "today's (30s fixed)", chain.Target{Breaker: todaysBreaker}},
			row{in.name, in.outage, "new defaults (5s doubling to 60s)", chain.Target{}},
			row{in.name, in.outage, "new defaults, active probe", chain.Target{Probe: probe}},
		)
	}
	const blipToday, blipNew, blipProbe, longToday, longNew, longProbe = 0, 1, 2, 3, 4, 5
	runs := inParallel(t, len(rows), func(t *testing.T, i int) recoveryRun { return recovery(t, rows[i].outage, rows[i].target) })
	for i, r := range rows {
		run := runs[i]
		back := "never"
		if run.back >= 0 {
			back = run.back.Round(time.Millisecond).String()
		}
		tb.row(r.incident, r.breaker, run.calls, run.failed, back, run.during, run.probes)
	}
	tb.note("Every row has the default retries (3 attempts, full jitter from 500ms) and ratio budget; the breaker opens after 5")
	tb.note("consecutive failures. Today's breaker is breaker.Config{FirstOpenFor: 30s, OpenFor: 30s}; the new defaults open for 5s")
	tb.note("first and twice as long after each failed probe, up to 60s. Without an active probe the first call after the open")
	tb.note("interval is the probe; with one (Target.Probe: one short message, MaxTokens 1) a timer sends it and calls are refused")
	tb.note("until it succeeds. Served again: from the primary's recovery to the first call answered after it (calls arrive every")
	tb.note("%v, so it is measured to that grain). Requests while down count every request that reached the primary during", recoveryEvery)
	tb.note("the outage: the failures that opened the breaker, the retries, the probes; of which probes counts the active")
	tb.note("probe's requests only (without one, the probes are users' calls). A passive probe goes with the first call after")
	tb.note("the open interval, up to %v late, so each failed one pushes the next a little later than an active probe's.", recoveryEvery)
	today, grown := runs[longToday], runs[longNew]
	tb.note("The 5m outage shows the trade: the growing interval sent %d requests to the dead primary where today's sent %d,",
		grown.during, today.during)
	tb.note("but by then it probes only every 60s: the primary served again %v after its recovery against %v, and %d more",
		grown.back.Round(time.Millisecond), today.back.Round(time.Millisecond), grown.failed-today.failed)
	tb.note("calls failed. After the 1s blip it served again %v after the recovery, where today's took %v.",
		runs[blipNew].back.Round(time.Millisecond), runs[blipToday].back.Round(time.Millisecond))
	tb.print(t)

	for _, i := range []int{blipNew, blipProbe} {
		if b := runs[i].back; b < 0 || b > 10*time.Second {
			t.Errorf("1s blip, %s: the primary served again %v after recovering, want within 10s", rows[i].breaker, b)
		}
	}
	for _, i := range []int{longNew, longProbe} {
		if got, today := runs[i].during, runs[longToday].during; got > today {
			t.Errorf("5m outage, %s: %d requests to the primary while down, more than today's breaker's %d", rows[i].breaker, got, today)
		}
	}
}
