package breaker_test

// Tests of recovery: the open interval that grows with each failed probe,
// and the active probe.

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// openInterval measures how long b, just opened, stays open: it tries
// Allow every step (from a nanosecond after the opening) until one lets a
// probe through, fails that probe (which opens b again) and returns the
// time from the opening to the probe. With an interval that is a multiple
// of step, the result is the interval itself: Allow refuses at the
// interval and lets the probe through right after it.
func openInterval(t *testing.T, b *breaker.Breaker, step time.Duration, fail retry.BreakerVerdict) time.Duration {
	t.Helper()
	start := time.Now()
	time.Sleep(time.Nanosecond)
	for range 10_000 {
		tk, err := b.Allow()
		if err == nil {
			tk.Report(fail)
			if b.State() != breaker.Open {
				t.Fatalf("a failed probe left the breaker %v; want open", b.State())
			}
			return time.Since(start) - time.Nanosecond
		}
		if !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Allow while open = %v; want ErrOpen", err)
		}
		time.Sleep(step)
	}
	t.Fatalf("still open after 10,000 steps of %v", step)
	return 0
}

// TestOpenIntervalGrows: a target whose probes keep failing stays open
// FirstOpenFor, then twice as long after each failed probe, up to
// OpenFor; a probe that succeeds closes the breaker and the next opening
// lasts FirstOpenFor again. The intervals are measured by when Allow first
// lets a probe through.
func TestOpenIntervalGrows(t *testing.T) {
	const s = time.Second
	for _, tc := range []struct {
		name string
		cfg  breaker.Config
		want []time.Duration // each opening, while the probes fail
	}{
		{"defaults: fixed", breaker.Config{}, []time.Duration{5 * s, 5 * s, 5 * s, 5 * s}},
		{"OpenFor a minute", breaker.Config{OpenFor: time.Minute}, []time.Duration{5 * s, 10 * s, 20 * s, 40 * s, 60 * s, 60 * s}},
		{"FirstOpenFor == OpenFor: fixed", breaker.Config{FirstOpenFor: 30 * s, OpenFor: 30 * s}, []time.Duration{30 * s, 30 * s, 30 * s, 30 * s}},
		{"OpenFor alone, under DefaultFirstOpenFor: fixed", breaker.Config{OpenFor: 2 * s}, []time.Duration{2 * s, 2 * s, 2 * s, 2 * s}},
		{"OpenFor alone, over DefaultFirstOpenFor", breaker.Config{OpenFor: 15 * s}, []time.Duration{5 * s, 10 * s, 15 * s, 15 * s}},
		{"FirstOpenFor alone", breaker.Config{FirstOpenFor: s}, []time.Duration{s, 2 * s, 4 * s, 5 * s, 5 * s}},
		{"custom", breaker.Config{FirstOpenFor: 3 * s, OpenFor: 20 * s}, []time.Duration{3 * s, 6 * s, 12 * s, 20 * s, 20 * s}},
		{"sub-second", breaker.Config{FirstOpenFor: 250 * time.Millisecond, OpenFor: 1500 * time.Millisecond},
			[]time.Duration{250 * time.Millisecond, 500 * time.Millisecond, s, 1500 * time.Millisecond, 1500 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := tc.cfg
				cfg.ConsecutiveFailures = 1
				b := mustNew(t, cfg)
				for round := range 2 {
					if got := b.OpenInterval(); got != tc.want[0] {
						t.Fatalf("round %d: OpenInterval() while closed = %v; want the next opening, %v", round, got, tc.want[0])
					}
					report(t, b, retry.Failure) // opens
					var got []time.Duration
					for i := range tc.want {
						if d := b.OpenInterval(); d != tc.want[i] {
							t.Fatalf("round %d, opening %d: OpenInterval() = %v; want %v", round, i, d, tc.want[i])
						}
						verdict := retry.Failure
						if i%2 == 1 {
							verdict = retry.Trip // a spend cap on the probe doubles it alike
						}
						got = append(got, openInterval(t, b, 250*time.Millisecond, verdict))
					}
					if !slices.Equal(got, tc.want) {
						t.Fatalf("round %d: open for %v; want %v", round, got, tc.want)
					}
					if b.MaxOpenFor() != tc.want[len(tc.want)-1] {
						t.Fatalf("OpenFor() = %v; want the cap, %v", b.MaxOpenFor(), tc.want[len(tc.want)-1])
					}
					// The probe succeeds: closed, and the next opening (the
					// next round) lasts FirstOpenFor again.
					time.Sleep(b.OpenInterval() + time.Nanosecond)
					report(t, b, retry.NotFailure)
					wantState(t, b, breaker.Closed, "after a successful probe")
				}
			})
		})
	}
}

// The zero FirstOpenFor is DefaultFirstOpenFor, or OpenFor when that is
// shorter; the zero OpenFor is DefaultOpenFor.
func TestOpenForDefaults(t *testing.T) {
	for _, tc := range []struct {
		in, want breaker.Config
	}{
		{breaker.Config{}, breaker.Config{FirstOpenFor: 5 * time.Second, OpenFor: 5 * time.Second}},
		{breaker.Config{OpenFor: 2 * time.Second}, breaker.Config{FirstOpenFor: 2 * time.Second, OpenFor: 2 * time.Second}},
		{breaker.Config{OpenFor: time.Hour}, breaker.Config{FirstOpenFor: 5 * time.Second, OpenFor: time.Hour}},
		{breaker.Config{FirstOpenFor: time.Second}, breaker.Config{FirstOpenFor: time.Second, OpenFor: 5 * time.Second}},
	} {
		d := tc.in.WithDefaults()
		if d.FirstOpenFor != tc.want.FirstOpenFor || d.OpenFor != tc.want.OpenFor {
			t.Errorf("%+v: FirstOpenFor %v, OpenFor %v; want %v, %v", tc.in, d.FirstOpenFor, d.OpenFor, tc.want.FirstOpenFor, tc.want.OpenFor)
		}
	}
	if breaker.DefaultFirstOpenFor != 5*time.Second || breaker.DefaultOpenFor != 5*time.Second {
		t.Fatalf("DefaultFirstOpenFor %v, DefaultOpenFor %v; want 5s, 5s", breaker.DefaultFirstOpenFor, breaker.DefaultOpenFor)
	}
}

// Each problem with FirstOpenFor is named with what to change, and
// matches llm.ErrInvalidConfig; a FirstOpenFor equal to OpenFor is a fixed
// interval, not a problem.
func TestFirstOpenForValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  breaker.Config
		want []string
	}{
		{breaker.Config{FirstOpenFor: -time.Second}, []string{"FirstOpenFor is -1s", "must not be negative", "0 means the default"}},
		{breaker.Config{FirstOpenFor: 10 * time.Second, OpenFor: 5 * time.Second},
			[]string{"FirstOpenFor (10s) is longer than OpenFor (5s)", "lower FirstOpenFor or raise OpenFor", "set FirstOpenFor to OpenFor for a fixed interval"}},
		{breaker.Config{FirstOpenFor: 90 * time.Second},
			[]string{"FirstOpenFor (1m30s) is longer than OpenFor (5s, the default)", "lower FirstOpenFor or raise OpenFor"}},
		{breaker.Config{FirstOpenFor: -time.Second, OpenFor: -time.Minute}, []string{"FirstOpenFor is -1s", "OpenFor is -1m0s"}},
	} {
		_, err := breaker.New("t", tc.cfg)
		if !errors.Is(err, llm.ErrInvalidConfig) {
			t.Errorf("%+v: New = %v; want llm.ErrInvalidConfig", tc.cfg, err)
			continue
		}
		if err2 := tc.cfg.Validate(); err2 == nil || err2.Error() != err.Error() {
			t.Errorf("%+v: Validate = %v; want New's error", tc.cfg, err2)
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%+v: error lacks %q:\n%v", tc.cfg, w, err)
			}
		}
		if strings.Contains(err.Error(), "longer than") && strings.Contains(err.Error(), "negative") {
			t.Errorf("%+v: a negative duration also compared:\n%v", tc.cfg, err)
		}
	}
	for _, cfg := range []breaker.Config{
		{FirstOpenFor: time.Minute, OpenFor: time.Minute},
		{FirstOpenFor: breaker.DefaultOpenFor},
		{OpenFor: time.Second},
		{FirstOpenFor: time.Nanosecond, OpenFor: time.Hour},
	} {
		if _, err := breaker.New("t", cfg); err != nil {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// transitions records a breaker's state changes as "from>to".
type transitions struct{ got []string }

func (r *transitions) record(_ string, from, to breaker.State) {
	r.got = append(r.got, from.String()+">"+to.String())
}

func (r *transitions) want(t *testing.T, want ...string) {
	t.Helper()
	if !slices.Equal(r.got, want) {
		t.Fatalf("transitions %q; want %q", r.got, want)
	}
}

// With ActiveProbe, users' attempts never probe: Allow refuses them while
// the breaker is open and once it is half-open, until a Probe succeeds.
// Probe takes the slot when ProbeAt says, not before; a failed one doubles
// the interval.
func TestActiveProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr transitions
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, OpenFor: time.Minute, ActiveProbe: true, OnStateChange: tr.record})
		if at := b.ProbeAt(); !at.IsZero() {
			t.Fatalf("ProbeAt() while closed = %v; want zero", at)
		}
		if _, err := b.Probe(); !errors.Is(err, breaker.ErrNotOpen) || errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Probe while closed = %v; want ErrNotOpen, not ErrOpen", err)
		}
		report(t, b, retry.Failure) // opens for 5s
		opened := time.Now()
		if at := b.ProbeAt(); !at.Equal(opened.Add(5*time.Second + 1)) {
			t.Fatalf("ProbeAt() = %v after opening; want 5s later and the instant after", at.Sub(opened))
		}
		refused := func(when string) {
			t.Helper()
			if tk, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) || tk.Held() {
				t.Fatalf("%s: Allow = %v; want ErrOpen", when, err)
			}
			if b.Closed() || !errors.Is(b.Refusal(), breaker.ErrOpen) {
				t.Fatalf("%s: Closed() %v, Refusal() %v; want false, ErrOpen", when, b.Closed(), b.Refusal())
			}
		}
		notDue := func(when string) {
			t.Helper()
			if tk, err := b.Probe(); !errors.Is(err, breaker.ErrOpen) || errors.Is(err, breaker.ErrNotOpen) || tk.Held() {
				t.Fatalf("%s: Probe = %v; want ErrOpen (not due)", when, err)
			}
		}
		refused("open")
		notDue("open")
		time.Sleep(5 * time.Second)
		refused("at ProbeAt")
		notDue("at ProbeAt")
		wantState(t, b, breaker.Open, "at ProbeAt")
		time.Sleep(time.Nanosecond)

		// Due: a user's attempt is still refused, and does not take the slot.
		refused("due")
		if s := b.State(); s != breaker.HalfOpen {
			t.Fatalf("State() once due = %v; want half-open", s)
		}
		refused("half-open")
		if at := b.ProbeAt(); !at.Equal(opened.Add(5*time.Second + 1)) {
			t.Fatalf("ProbeAt() half-open = %v after opening; want 5s and the instant after (passed)", at.Sub(opened))
		}
		probe, err := b.Probe()
		if err != nil || !probe.Held() {
			t.Fatalf("Probe once due = %v; want the slot", err)
		}
		if _, err := b.Probe(); !errors.Is(err, breaker.ErrOpen) || !strings.Contains(err.Error(), "in flight") {
			t.Fatalf("a second Probe = %v; want ErrOpen, the probe in flight", err)
		}
		refused("probe in flight")
		probe.Report(retry.Failure) // opens for 10s
		wantState(t, b, breaker.Open, "after a failed probe")
		opened = time.Now()
		if d, at := b.OpenInterval(), b.ProbeAt(); d != 10*time.Second || !at.Equal(opened.Add(d+1)) {
			t.Fatalf("after a failed probe: OpenInterval() %v, ProbeAt() %v later; want 10s, 10s", d, at.Sub(opened))
		}
		time.Sleep(10 * time.Second)
		notDue("just before the doubled interval passed")
		time.Sleep(time.Nanosecond)
		refused("due again")

		// A canceled probe (Excluded) frees the slot for another.
		probe, err = b.Probe()
		if err != nil {
			t.Fatalf("Probe: %v", err)
		}
		probe.Report(retry.Excluded)
		if probe, err = b.Probe(); err != nil {
			t.Fatalf("Probe after a canceled probe: %v; want the slot again", err)
		}
		refused("second probe in flight")
		probe.Report(retry.NotFailure)
		wantState(t, b, breaker.Closed, "after a successful probe")
		if at := b.ProbeAt(); !at.IsZero() {
			t.Fatalf("ProbeAt() after the close = %v; want zero", at)
		}
		if _, err := b.Probe(); !errors.Is(err, breaker.ErrNotOpen) {
			t.Fatalf("Probe after the close = %v; want ErrNotOpen", err)
		}
		if d := b.OpenInterval(); d != 5*time.Second {
			t.Fatalf("OpenInterval() after the close = %v; want FirstOpenFor again", d)
		}
		reportN(t, b, retry.NotFailure, 3) // users' calls go through again
		tr.want(t, "closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed")
	})
}

// With ActiveProbe and Probes 2, two probes take the two slots and both
// must succeed; users' attempts take none.
func TestActiveProbeWithTwoProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, Probes: 2, ActiveProbe: true})
		report(t, b, retry.Failure)
		time.Sleep(breaker.DefaultFirstOpenFor + time.Nanosecond)
		p1, err1 := b.Probe()
		p2, err2 := b.Probe()
		if err1 != nil || err2 != nil {
			t.Fatalf("two Probes with Probes 2: %v, %v", err1, err2)
		}
		if _, err := b.Probe(); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("a third Probe = %v; want ErrOpen", err)
		}
		p1.Report(retry.NotFailure)
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Allow after one of two probes succeeded = %v; want ErrOpen", err)
		}
		p2.Report(retry.NotFailure)
		wantState(t, b, breaker.Closed, "after two successful probes")
	})
}

// Without ActiveProbe, Probe and users' attempts compete for the slot:
// whichever comes first once the interval has passed probes. ProbeAt says
// when, with or without ActiveProbe.
func TestProbeWithoutActiveProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, OpenFor: time.Minute})
		report(t, b, retry.Failure)
		if at := b.ProbeAt(); !at.Equal(time.Now().Add(breaker.DefaultFirstOpenFor + 1)) {
			t.Fatalf("ProbeAt() = %v from now; want FirstOpenFor", time.Until(at))
		}
		if _, err := b.Probe(); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Probe before due = %v; want ErrOpen", err)
		}
		time.Sleep(breaker.DefaultFirstOpenFor + time.Nanosecond)
		probe, err := b.Probe()
		if err != nil {
			t.Fatalf("Probe once due: %v", err)
		}
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) || !strings.Contains(err.Error(), "in flight") {
			t.Fatalf("Allow with the Probe in flight = %v; want ErrOpen, the probe in flight", err)
		}
		probe.Report(retry.NotFailure)
		wantState(t, b, breaker.Closed, "after the Probe succeeded")

		report(t, b, retry.Failure)
		time.Sleep(breaker.DefaultFirstOpenFor + time.Nanosecond)
		user, err := b.Allow() // a user's attempt takes the slot first
		if err != nil {
			t.Fatalf("Allow once due: %v", err)
		}
		if _, err := b.Probe(); !errors.Is(err, breaker.ErrOpen) || !strings.Contains(err.Error(), "in flight") {
			t.Fatalf("Probe with a user's probe in flight = %v; want ErrOpen, the probe in flight", err)
		}
		user.Report(retry.Failure)
		if d := b.OpenInterval(); d != 2*breaker.DefaultFirstOpenFor {
			t.Fatalf("OpenInterval() after a failed probe = %v; want doubled", d)
		}
	})
}

// A disabled breaker, or one another replica holds open, has nothing to
// probe: Probe returns ErrNotOpen and ProbeAt the zero time.
func TestProbeNothingToProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := mustNew(t, breaker.Config{Disabled: true, ActiveProbe: true})
		if _, err := d.Probe(); !errors.Is(err, breaker.ErrNotOpen) {
			t.Fatalf("disabled: Probe = %v; want ErrNotOpen", err)
		}
		if !d.ProbeAt().IsZero() || d.OpenInterval() != 0 || d.MaxOpenFor() != 0 {
			t.Fatalf("disabled: ProbeAt() %v, OpenInterval() %v, OpenFor() %v; want zeros", d.ProbeAt(), d.OpenInterval(), d.MaxOpenFor())
		}
		if _, err := d.Allow(); err != nil {
			t.Fatalf("disabled, ActiveProbe: Allow = %v", err)
		}

		b := mustNew(t, breaker.Config{ActiveProbe: true})
		openElsewhere(t, b, time.Now().Add(time.Minute), stateChanges(b), 0)
		heldElsewhere(t, b, "held open by another replica")
		if _, err := b.Probe(); !errors.Is(err, breaker.ErrNotOpen) {
			t.Fatalf("held elsewhere: Probe = %v; want ErrNotOpen (the other replica probes)", err)
		}
		if at := b.ProbeAt(); !at.IsZero() {
			t.Fatalf("held elsewhere: ProbeAt() = %v; want zero", at)
		}
	})
}

// With Probes 2, one probe failing reopens the breaker for twice as long;
// the other's outcome, reported later (once gobreaker's own Timeout, the
// first interval, has passed but not the doubled one), changes nothing:
// the breaker stays open until the doubled interval has passed, and
// OnStateChange hears of each change once, in order.
func TestStaleProbeDoesNotShortenTheInterval(t *testing.T) {
	for _, v := range []retry.BreakerVerdict{retry.NotFailure, retry.Failure, retry.Excluded, retry.Trip} {
		t.Run(v.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var tr transitions
				b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, OpenFor: time.Minute, Probes: 2, OnStateChange: tr.record})
				report(t, b, retry.Failure)
				time.Sleep(breaker.DefaultFirstOpenFor + time.Nanosecond)
				p1, err1 := b.Allow()
				p2, err2 := b.Allow()
				if err1 != nil || err2 != nil {
					t.Fatalf("two probes: %v, %v", err1, err2)
				}
				p1.Report(retry.Failure) // reopens for 10s
				time.Sleep(breaker.DefaultFirstOpenFor + time.Second)
				p2.Report(v)
				for _, at := range []time.Duration{0, 4 * time.Second} { // now, and at the end of the 10s
					time.Sleep(at)
					wantState(t, b, breaker.Open, "after the stale probe's report")
					if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
						t.Fatalf("Allow within the doubled interval = %v; want ErrOpen", err)
					}
				}
				tr.want(t, "closed>open", "open>half-open", "half-open>open")
				time.Sleep(time.Nanosecond)
				if _, err := b.Allow(); err != nil {
					t.Fatalf("Allow once the doubled interval passed = %v; want the probe", err)
				}
				tr.want(t, "closed>open", "open>half-open", "half-open>open", "open>half-open")
			})
		})
	}
}

// Allow, Probe, State, ProbeAt and OpenInterval racing with reports while
// the target fails most calls (run with -race): OnStateChange hears a
// chain of transitions (each from the state the last one went to), the
// interval stays within [FirstOpenFor, OpenFor], and ProbeAt is zero
// exactly when the breaker is closed.
func TestRecoveryConcurrently(t *testing.T) {
	for _, active := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var tr transitions
			cfg := breaker.Config{ConsecutiveFailures: 2, FirstOpenFor: time.Second, OpenFor: 8 * time.Second, Probes: 2, ActiveProbe: active,
				OnStateChange: func(name string, from, to breaker.State) {
					mu.Lock()
					defer mu.Unlock()
					tr.record(name, from, to)
				}}
			b := mustNew(t, cfg)
			var wg sync.WaitGroup
			for g := range 8 {
				wg.Go(func() {
					for i := range 300 {
						var tk breaker.Ticket
						var err error
						if (g+i)%3 == 0 {
							tk, err = b.Probe()
						} else {
							tk, err = b.Allow()
						}
						if err == nil {
							time.Sleep(time.Duration((g+i)%7) * 50 * time.Millisecond)
							switch (g * i) % 5 {
							case 0:
								tk.Report(retry.NotFailure)
							case 1:
								tk.Report(retry.Excluded)
							default:
								tk.Report(retry.Failure)
							}
						}
						if d := b.OpenInterval(); d < cfg.FirstOpenFor || d > cfg.OpenFor {
							t.Errorf("OpenInterval() = %v; want within [%v, %v]", d, cfg.FirstOpenFor, cfg.OpenFor)
						}
						_ = b.State()
						_ = b.ProbeAt()
						time.Sleep(100 * time.Millisecond)
					}
				})
			}
			wg.Wait()
			if (b.State() == breaker.Closed) != b.ProbeAt().IsZero() {
				t.Errorf("State() %v, ProbeAt() %v: zero exactly when closed", b.State(), b.ProbeAt())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(tr.got) < 4 {
				t.Fatalf("only %d transitions: %q", len(tr.got), tr.got)
			}
			t.Logf("ActiveProbe %v: %d transitions", active, len(tr.got))
			last := "closed"
			for i, c := range tr.got {
				from, to, _ := strings.Cut(c, ">")
				if from != last {
					t.Fatalf("transition %d, %q, does not start where the last ended (%s): %q", i, c, last, tr.got)
				}
				last = to
			}
		})
	}
}
