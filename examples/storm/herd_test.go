package storm

import (
	"encoding/csv"
	"os"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
)

// The herd: herdClients clients call at the same instant, the provider
// answers 503 to every request that arrives at that instant and answers
// everything later. How bunched up do the retries come back?
const (
	herdClients = 200
	herdWindow  = 100 * time.Millisecond
)

// herdRun is what one herd did.
type herdRun struct {
	first, retries int           // requests to the primary at t=0, and after
	peak           int           // most retries in any herdWindow
	peakBucket     int           // most retries in one of the series' buckets
	answered       time.Duration // when the last call was answered
	primary, next  int           // calls served by the primary, by the next tier
	series         []int         // retries per herdWindow from t=0
}

// herd runs herdClients calls at once through a chain whose primary is
// target and whose next tier is a healthy sibling.
func herd(t *testing.T, target chain.Target) herdRun {
	var run herdRun
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		start := time.Now()
		f.Handle(primaryModel, func(c fake.Call) fake.Outcome {
			if c.Time.Equal(start) {
				return fake.Status(503)
			}
			return fake.Answer("back")
		})
		c := build(t, f, target, true)
		var mu sync.Mutex
		arrivals(herdClients, 0, func(int) {
			res, err := c.Call(t.Context(), ask)
			if err != nil {
				t.Errorf("call failed: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			run.answered = max(run.answered, time.Since(start))
			if res.Served.Target == "primary" {
				run.primary++
			} else {
				run.next++
			}
		})
		var retries []time.Time
		for _, at := range f.Arrivals(primaryModel) {
			if at.After(start) {
				retries = append(retries, at)
			} else {
				run.first++
			}
		}
		run.retries = len(retries)
		run.peak = maxInWindow(retries, herdWindow)
		run.series = buckets(retries, start, herdWindow)
		for _, n := range run.series {
			run.peakBucket = max(run.peakBucket, n)
		}
	})
	return run
}

func TestStormHerd(t *testing.T) {
	tb := table{
		title: "Herd: 200 clients fail together at t=0 (503), then retry with Base 1s, MaxAttempts 5",
		shows: "The most retries reaching the provider in any 100 ms window after the failure, by jitter; budget and breaker off, so jitter alone is measured.",
		head: []string{"retry policy", "first attempts", "retries", "max in any 100 ms", "max per 100 ms bucket",
			"published", "last answer at", "by primary", "by next tier"},
	}
	modes := []retry.Jitter{retry.NoJitter, retry.FullJitter, retry.EqualJitter, retry.DecorrelatedJitter}
	published := map[retry.Jitter]string{retry.NoJitter: "200", retry.FullJitter: "about 20"}
	runs := make(map[retry.Jitter]herdRun)
	add := func(name, pub string, r herdRun) {
		if pub == "" {
			pub = "-"
		}
		tb.row(name, r.first, r.retries, r.peak, r.peakBucket, pub, r.answered, r.primary, r.next)
	}
	for _, j := range modes {
		r := herd(t, chain.Target{
			Retry:   retry.Policy{Base: time.Second, MaxAttempts: 5, Jitter: j},
			Budget:  budget.Unlimited(),
			Breaker: breaker.Config{Disabled: true},
		})
		runs[j] = r
		name := j.String() + " jitter"
		if j == retry.NoJitter {
			name = "no jitter"
		}
		add(name, published[j], r)
	}
	budgetOnly := herd(t, chain.Target{Breaker: breaker.Config{Disabled: true}})
	add("defaults, breaker off", "", budgetOnly)
	def := herd(t, chain.Target{})
	add("backstop defaults", "", def)

	tb.note("none: every client waits exactly 1s, so the herd comes back whole; full jitter waits U(0, 1s), equal 0.5s + U(0, 0.5s),")
	tb.note("decorrelated U(1s, 3s). The published figures count fixed 100 ms buckets on average (200 retries over 1s); the busiest")
	tb.note("window is above the average. \"defaults\" is the zero Target: full jitter from 500ms, 3 attempts, the ratio budget (10%%,")
	tb.note("floor 10) and the breaker (opens after 5 consecutive failures).")
	tb.note("What the defaults trade: fewer retries reach the provider at all. With the budget alone, %d of 200 failed calls were",
		budgetOnly.retries)
	tb.note("retried; the other %d went to the next tier at once. With the breaker too, it opened after the first %d failures: %d calls",
		budgetOnly.next, def.first, herdClients-def.first)
	tb.note("skipped the primary without a request, %d retries were sent, and %d of %d calls were answered by the next tier (a",
		def.retries, def.next, herdClients)
	tb.note("different model), the last at %v (the %d that failed first slept their backoff before finding the breaker open),",
		def.answered.Round(time.Millisecond), def.first)
	tb.note("where with full jitter alone the primary answered them all by %v.", runs[retry.FullJitter].answered.Round(time.Millisecond))
	tb.print(t)

	none, full := runs[retry.NoJitter].peak, runs[retry.FullJitter].peak
	if full*4 > none {
		t.Errorf("full jitter's busiest 100 ms has %d retries, more than a quarter of no jitter's %d", full, none)
	}
	if path := os.Getenv("STORM_CSV"); path != "" {
		if err := writeHerdCSV(path, modes, runs); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote the herd's retries per 100 ms to %s", path)
	}
}

// writeHerdCSV writes the retries per 100 ms bucket: a column ms (the
// bucket's start after the failure) and one column per jitter mode.
func writeHerdCSV(path string, modes []retry.Jitter, runs map[retry.Jitter]herdRun) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	head := []string{"ms"}
	n := 0
	for _, j := range modes {
		head = append(head, j.String())
		n = max(n, len(runs[j].series))
	}
	_ = w.Write(head)
	for i := range n + 1 { // one empty bucket after the last retry
		rec := []string{strconv.FormatInt(int64(i)*herdWindow.Milliseconds(), 10)}
		for _, j := range modes {
			v := 0
			if s := runs[j].series; i < len(s) {
				v = s[i]
			}
			rec = append(rec, strconv.Itoa(v))
		}
		_ = w.Write(rec)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
