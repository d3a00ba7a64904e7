package redisstore_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/redis/go-redis/v9"
)

// store returns the shared stores on c, failing the test on a
// configuration error.
func store(t testing.TB, c redis.UniversalClient) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTestShared returns a breaker.Shared on the store under key through c,
// failing the test on a configuration error. A zero Timeout is made 10s,
// so that a loaded machine does not turn a test's round trip into a
// failure.
func newTestShared(t testing.TB, c redis.UniversalClient, key string, opts breaker.SharedConfig) *breaker.Shared {
	t.Helper()
	opts.Timeout = cmp.Or(opts.Timeout, sharedTestTimeout)
	s, err := breaker.NewShared(store(t, c).Breakers(key), opts)
	must(t, "breaker.NewShared", err)
	return s
}

// sharedTestTimeout is the Timeout of the tests' shared breakers and budgets
// that set none.
const sharedTestTimeout = 10 * time.Second

// load returns s.Load sorted by name, failing the test on an error.
func load(t testing.TB, s *breaker.Shared) []remote.Published {
	t.Helper()
	rs, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	slices.SortFunc(rs, func(a, b remote.Published) int { return cmp.Compare(a.Name, b.Name) })
	return rs
}

// must fails the test on err, naming what returned it.
func must(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// hkeys returns the fields of key in m, sorted.
func hkeys(t testing.TB, m *miniredis.Miniredis, key string) []string {
	t.Helper()
	if !m.Exists(key) {
		return nil
	}
	fields, err := m.HKeys(key)
	if err != nil {
		t.Fatalf("HKeys(%q): %v", key, err)
	}
	slices.Sort(fields)
	return fields
}

// t0 pins miniredis's clock (its TIME, which the scripts read), so that the
// remaining durations Load returns are exact. It is a budget bucket's
// boundary too.
var t0 = time.Unix(1_800_000_000, 0)

const sharedKey = "backstop:c:breakers"

// saysAll fails the test unless err matches sentinel and says each of want.
func saysAll(t *testing.T, err, sentinel error, want []string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("error %q does not match %v", err, sentinel)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// wantDown fails the test unless a store that lost Redis says so: not
// available, and told OnError once, with an error matching sentinel.
func wantDown(t *testing.T, available bool, calls *redistest.Errors, sentinel error) {
	t.Helper()
	if available {
		t.Fatal("Available() with Redis down")
	}
	if errs := calls.Get(); len(errs) != 1 || !errors.Is(errs[0], sentinel) {
		t.Fatalf("OnError calls: %v; want one error matching %v", errs, sentinel)
	}
}

// pinnedShared is a miniredis whose clock is pinned at t0 and a shared
// breaker store on sharedKey in it.
func pinnedShared(t *testing.T) (*miniredis.Miniredis, *breaker.Shared) {
	t.Helper()
	m, c, _ := pinnedRedis(t)
	return m, newTestShared(t, c, sharedKey, breaker.SharedConfig{})
}

// pinnedRedis is a miniredis whose clock is pinned at t0 and a client of
// it that counts its round trips.
func pinnedRedis(t *testing.T) (*miniredis.Miniredis, *redis.Client, *redistest.RoundTrips) {
	t.Helper()
	m := miniredis.RunT(t)
	m.SetTime(t0)
	c, rt := redistest.CountedClient(t, m.Addr())
	return m, c, rt
}

// wantLoad fails the test unless s.Load returns want; when (ending in a
// space) says when.
func wantLoad(t *testing.T, s *breaker.Shared, want []remote.Published, when string) {
	t.Helper()
	if rs := load(t, s); !slices.Equal(rs, want) {
		t.Fatalf("%sLoad = %+v; want %+v", when, rs, want)
	}
}

func TestNewSharedInvalid(t *testing.T) {
	m := miniredis.RunT(t)
	good, _ := redistest.CountedClient(t, m.Addr())
	noCtx, noCtxCluster, noCtxRing := redistest.UnboundedClients(t, m.Addr())

	// The client: redisstore.New refuses it.
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		want   []string
	}{
		{"nil client", nil, []string{"client is nil", "ContextTimeoutEnabled: true"}},
		{"typed nil client", (*redis.Client)(nil), []string{"nil *redis.Client"}},
		{"typed nil cluster", (*redis.ClusterClient)(nil), []string{"nil *redis.ClusterClient"}},
		{"typed nil ring", (*redis.Ring)(nil), []string{"nil *redis.Ring"}},
		{"no context timeouts", noCtx, []string{"ContextTimeoutEnabled is false", "the shared stores' Timeout"}},
		{"cluster without context timeouts", noCtxCluster, []string{"ContextTimeoutEnabled is false"}},
		{"ring without context timeouts", noCtxRing, []string{"ContextTimeoutEnabled is false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := redisstore.New(tc.client)
			if err == nil || s != nil {
				t.Fatalf("New = %v, %v; want an error", s, err)
			}
			saysAll(t, err, llm.ErrInvalidConfig, tc.want)
			// A nil *Shared builds no store, which breaker.NewShared refuses.
			if st := s.Breakers("k"); st != nil {
				t.Errorf("a nil Shared's Breakers = %v; want nil", st)
			}
			if _, err := breaker.NewShared(s.Breakers("k"), breaker.SharedConfig{}); !errors.Is(err, llm.ErrInvalidConfig) ||
				!strings.Contains(err.Error(), "store is nil") {
				t.Errorf("breaker.NewShared of a nil Shared's store: %v; want llm.ErrInvalidConfig saying the store is nil", err)
			}
		})
	}

	// The rest: breaker.NewShared refuses it, every problem at once.
	st := store(t, good)
	for _, tc := range []struct {
		name  string
		store breaker.Store
		opts  breaker.SharedConfig
		want  []string
	}{
		{"nil store", nil, breaker.SharedConfig{}, []string{"store is nil", "redisstore.New"}},
		{"empty key", st.Breakers(""), breaker.SharedConfig{}, []string{"key is empty"}},
		{"negative Timeout", st.Breakers("k"), breaker.SharedConfig{Timeout: -1}, []string{"Timeout is -1ns", "0 means 50ms"}},
		{"negative ProbeEvery", st.Breakers("k"), breaker.SharedConfig{ProbeEvery: -time.Second}, []string{"ProbeEvery is -1s", "0 means 1s"}},
		{"all at once, nil store", nil, breaker.SharedConfig{Timeout: -1, ProbeEvery: -1},
			[]string{"store is nil", "Timeout is -1ns", "ProbeEvery is -1ns"}},
		{"all at once, empty key", st.Breakers(""), breaker.SharedConfig{Timeout: -time.Minute, ProbeEvery: -time.Hour},
			[]string{"key is empty", "Timeout is -1m0s", "ProbeEvery is -1h0m0s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := breaker.NewShared(tc.store, tc.opts)
			if err == nil || s != nil {
				t.Fatalf("New = %v, %v; want an error", s, err)
			}
			saysAll(t, err, llm.ErrInvalidConfig, tc.want)
			// Every problem is its own error, each matching the sentinel.
			var each []error
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				each = j.Unwrap()
			} else {
				each = []error{err}
			}
			want := 1
			if strings.HasPrefix(tc.name, "all at once") {
				want = 3 // the store or its key, Timeout, ProbeEvery
			}
			if len(each) != want {
				t.Errorf("%d problems reported (%q); want %d", len(each), err, want)
			}
			for _, e := range each {
				if !errors.Is(e, llm.ErrInvalidConfig) {
					t.Errorf("problem %q does not match llm.ErrInvalidConfig", e)
				}
			}
		})
	}
}

// NewShared and breaker.NewShared make no round trip: Redis may be down
// when they are called.
func TestBreakersMakeNoRoundTripWhenBuilt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c, rt := redistest.CountedClient(t, addr)
	var calls redistest.Errors
	var logs redistest.Log
	s, err := breaker.NewShared(store(t, c).Breakers(sharedKey), breaker.SharedConfig{OnError: calls.Add,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil || s == nil {
		t.Fatalf("NewShared with Redis down = %v, %v; want a Shared", s, err)
	}
	if d, e := rt.Dials.Load(), rt.Evals.Load(); d != 0 || e != 0 {
		t.Fatalf("NewShared dialed %d times and sent %d scripts; want none", d, e)
	}
	if !s.Available() || len(calls.Get()) != 0 || logs.String() != "" {
		t.Fatalf("a new Shared: Available %v, OnError %v, log %q; want true, none, empty", s.Available(), calls.Get(), logs.String())
	}
}

// What is published is what Load returns: the remaining time on the Redis
// server's clock, per name and kind, publications rounded up to a
// millisecond.
func TestBreakersPublishAndLoad(t *testing.T) {
	ctx := context.Background()
	m, c, rt := pinnedRedis(t)
	s := newTestShared(t, c, sharedKey, breaker.SharedConfig{})
	if rs := load(t, s); len(rs) != 0 {
		t.Fatalf("Load of an empty key = %+v; want nothing", rs)
	}
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", 30*time.Second))
	must(t, "PublishGate", s.PublishGate(ctx, "b", 90*time.Second))
	must(t, "PublishGate", s.PublishGate(ctx, "a", 1500*time.Microsecond)) // rounded up to 2ms
	must(t, "PublishOpen", s.PublishOpen(ctx, "c", time.Nanosecond))       // rounded up to 1ms
	want := []remote.Published{
		{Name: "a", Open: 30 * time.Second, Gate: 2 * time.Millisecond},
		{Name: "b", Gate: 90 * time.Second},
		{Name: "c", Open: time.Millisecond},
	}
	wantLoad(t, s, want, "")
	if n := rt.Evals.Load(); n != 6 {
		t.Fatalf("2 Loads and 4 publications sent %d scripts; want 6, one round trip each", n)
	}
	if got := hkeys(t, m, sharedKey); !slices.Equal(got, []string{"g:a", "g:b", "o:a", "o:c"}) {
		t.Fatalf("fields %v; want g:a g:b o:a o:c", got)
	}

	// Another replica, with its own client, reads the same.
	c2, _ := redistest.CountedClient(t, m.Addr())
	s2 := newTestShared(t, c2, sharedKey, breaker.SharedConfig{})
	if rs := load(t, s2); !slices.Equal(rs, want) {
		t.Fatalf("another replica's Load = %+v; want %+v", rs, want)
	}
	// ...and one on another key reads nothing.
	if rs := load(t, newTestShared(t, c2, sharedKey+"2", breaker.SharedConfig{})); len(rs) != 0 {
		t.Fatalf("Load on another key = %+v; want nothing", rs)
	}

	// Remaining times count down on the server's clock.
	m.SetTime(t0.Add(10*time.Second + 250*time.Millisecond))
	want = []remote.Published{
		{Name: "a", Open: 19*time.Second + 750*time.Millisecond},
		{Name: "b", Gate: 79*time.Second + 750*time.Millisecond},
	}
	wantLoad(t, s, want, "10.25s later ")
}

// A publication that ends later is kept over one that ends sooner, whoever
// writes it, for both kinds.
func TestBreakersKeepsTheLaterPublication(t *testing.T) {
	ctx := context.Background()
	m, s := pinnedShared(t)
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", time.Minute))
	must(t, "PublishGate", s.PublishGate(ctx, "a", time.Minute))
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", 10*time.Second))
	must(t, "PublishGate", s.PublishGate(ctx, "a", time.Second))
	want := []remote.Published{{Name: "a", Open: time.Minute, Gate: time.Minute}}
	wantLoad(t, s, want, "after shorter publications ")
	m.SetTime(t0.Add(30 * time.Second))
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", 20*time.Second)) // ends at 50s: before 60s
	must(t, "PublishGate", s.PublishGate(ctx, "a", 45*time.Second)) // ends at 75s: after 60s
	want = []remote.Published{{Name: "a", Open: 30 * time.Second, Gate: 45 * time.Second}}
	wantLoad(t, s, want, "30s later ")
	if ttl := m.TTL(sharedKey); ttl != 45*time.Second {
		t.Fatalf("TTL = %v; want the gate's 45s", ttl)
	}
}

// PublishClosed removes the open field only: the gate stays, other names
// stay, and closing what is not open is harmless.
func TestBreakersPublishClosed(t *testing.T) {
	ctx := context.Background()
	m, s := pinnedShared(t)
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", time.Minute))
	must(t, "PublishGate", s.PublishGate(ctx, "a", 20*time.Second))
	must(t, "PublishOpen", s.PublishOpen(ctx, "b", 2*time.Minute))
	must(t, "PublishClosed", s.PublishClosed(ctx, "a"))
	want := []remote.Published{{Name: "a", Gate: 20 * time.Second}, {Name: "b", Open: 2 * time.Minute}}
	wantLoad(t, s, want, "after PublishClosed(a) ")
	if got := hkeys(t, m, sharedKey); !slices.Equal(got, []string{"g:a", "o:b"}) {
		t.Fatalf("fields %v; want g:a o:b", got)
	}
	must(t, "PublishClosed", s.PublishClosed(ctx, "a"))
	must(t, "PublishClosed", s.PublishClosed(ctx, "never-opened"))
	wantLoad(t, s, want, "after closing what is not open ")
}

// The key expires with its last field (PTTL is that field's remaining
// time) and disappears when its last field is removed.
func TestBreakersKeyLifetime(t *testing.T) {
	ctx := context.Background()
	m, c, _ := pinnedRedis(t)
	s := newTestShared(t, c, sharedKey, breaker.SharedConfig{})
	pttl := func() time.Duration {
		t.Helper()
		d, err := c.PTTL(ctx, sharedKey).Result()
		if err != nil {
			t.Fatalf("PTTL: %v", err)
		}
		if m.TTL(sharedKey) != d {
			t.Fatalf("miniredis TTL %v, PTTL %v", m.TTL(sharedKey), d)
		}
		return d
	}
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", 30*time.Second))
	if d := pttl(); d != 30*time.Second {
		t.Fatalf("PTTL = %v; want 30s", d)
	}
	must(t, "PublishGate", s.PublishGate(ctx, "b", 2*time.Minute))
	if d := pttl(); d != 2*time.Minute {
		t.Fatalf("PTTL = %v; want the later field's 2m", d)
	}
	must(t, "PublishOpen", s.PublishOpen(ctx, "c", time.Second))
	if d := pttl(); d != 2*time.Minute {
		t.Fatalf("PTTL = %v after a shorter publication; want still 2m", d)
	}
	m.SetTime(t0.Add(100 * time.Second))
	must(t, "PublishClosed", s.PublishClosed(ctx, "nothing"))
	if d := pttl(); d != 20*time.Second {
		t.Fatalf("PTTL = %v 100s later; want the 20s left of the last field", d)
	}

	// The key disappears with its last field, removed...
	must(t, "PublishClosed", s.PublishClosed(ctx, "b")) // not an open field: b's gate stays
	if !m.Exists(sharedKey) {
		t.Fatal("the key disappeared while b's gate is closed")
	}
	m.SetTime(t0)
	m.Del(sharedKey)
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", time.Minute))
	must(t, "PublishClosed", s.PublishClosed(ctx, "a"))
	if m.Exists(sharedKey) {
		t.Fatalf("the key outlived its last field: fields %v", hkeys(t, m, sharedKey))
	}
	// ...or ended.
	must(t, "PublishGate", s.PublishGate(ctx, "a", time.Minute))
	m.SetTime(t0.Add(time.Minute))
	must(t, "PublishClosed", s.PublishClosed(ctx, "other"))
	if m.Exists(sharedKey) {
		t.Fatalf("the key outlived its last field, ended: fields %v", hkeys(t, m, sharedKey))
	}
	if rs := load(t, s); len(rs) != 0 {
		t.Fatalf("Load = %+v; want nothing", rs)
	}
	// And it expires by itself with its last field.
	m.SetTime(t0)
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", time.Minute))
	m.FastForward(time.Minute)
	if m.Exists(sharedKey) {
		t.Fatal("the key outlived its last field's end")
	}
}

// A field that has ended is not returned, and the next write deletes it.
func TestBreakersEndedFields(t *testing.T) {
	ctx := context.Background()
	m, s := pinnedShared(t)
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", 10*time.Second))
	must(t, "PublishGate", s.PublishGate(ctx, "a", 5*time.Second))
	must(t, "PublishGate", s.PublishGate(ctx, "b", time.Minute))
	m.SetTime(t0.Add(5 * time.Second)) // a's gate ends exactly now
	want := []remote.Published{{Name: "a", Open: 5 * time.Second}, {Name: "b", Gate: 55 * time.Second}}
	wantLoad(t, s, want, "5s later ")
	m.SetTime(t0.Add(10 * time.Second)) // and a's breaker
	want = []remote.Published{{Name: "b", Gate: 50 * time.Second}}
	wantLoad(t, s, want, "10s later ")
	if got := hkeys(t, m, sharedKey); len(got) != 3 {
		t.Fatalf("fields %v; want all three until the next write (Load does not write)", got)
	}
	must(t, "PublishGate", s.PublishGate(ctx, "b", time.Second)) // shorter: changes nothing but the cleanup
	if got := hkeys(t, m, sharedKey); !slices.Equal(got, []string{"g:b"}) {
		t.Fatalf("fields after a write %v; want g:b only", got)
	}
	wantLoad(t, s, want, "after the write ")
	if ttl := m.TTL(sharedKey); ttl != 50*time.Second {
		t.Fatalf("TTL = %v; want 50s", ttl)
	}
}

// Fields the scripts did not write are not returned: no kind and name, no
// name, values that are not numbers. A write deletes those whose value is
// not a number; a well-formed field next to them is read as usual.
func TestBreakersLoadIgnoresForeignFields(t *testing.T) {
	ctx := context.Background()
	m := miniredis.RunT(t)
	m.SetTime(t0)
	future := "1800000060000" // t0 + 60s, in milliseconds
	m.HSet(sharedKey,
		"x", future,
		"o:", future,
		"g:", future,
		"o", future,
		"oo:a", future,
		"q:foo", "bar",
		"o:bad", "soon",
		"g:bad", "",
		"o:neg", "-5",
		"g:frac", "1800000000000.5", // half a millisecond ahead: nothing left in whole milliseconds
		"o:good", future,
	)
	c, _ := redistest.CountedClient(t, m.Addr())
	s := newTestShared(t, c, sharedKey, breaker.SharedConfig{})
	want := []remote.Published{{Name: "good", Open: time.Minute}}
	if rs := load(t, s); !slices.Equal(rs, want) {
		t.Fatalf("Load = %+v; want %+v only", rs, want)
	}
	must(t, "PublishGate", s.PublishGate(ctx, "good", 30*time.Second))
	want = []remote.Published{{Name: "good", Open: time.Minute, Gate: 30 * time.Second}}
	if rs := load(t, s); !slices.Equal(rs, want) {
		t.Fatalf("after a write Load = %+v; want %+v only", rs, want)
	}
	for _, gone := range []string{"q:foo", "o:bad", "g:bad", "o:neg"} {
		if slices.Contains(hkeys(t, m, sharedKey), gone) {
			t.Errorf("field %q, not a future number, survived a write", gone)
		}
	}
}

// A field of another kind than "o" and "g" is not returned, even with a
// numeric value in the future: Load documents one remote.Published per name "with an
// open breaker or a closed gate", and such a field is neither.
//
// This fails against shared.go as written: Load checks field[1] == ':'
// but not field[0], and appends remote.Published{Name: "foo"} before the switch on
// the kind, which then sets neither Open nor Gate.
func TestBreakersLoadIgnoresUnknownKinds(t *testing.T) {
	m, s := pinnedShared(t)
	m.HSet(sharedKey, "q:foo", "1800000060000", "x:bar", "1800000060000", "o:good", "1800000060000")
	want := []remote.Published{{Name: "good", Open: time.Minute}}
	if rs := load(t, s); !slices.Equal(rs, want) {
		t.Fatalf("Load = %+v; want %+v only (q:foo and x:bar are neither an open breaker nor a closed gate)", rs, want)
	}
}

// A value so far ahead that its remaining milliseconds overflow a
// time.Duration is not returned as a negative (or wrapped) duration.
//
// This fails against shared.go as written: Load converts with
// time.Duration(ms) * time.Millisecond without a bound, so 2e13 (a field
// ending in the year 2603, 1.82e13 ms ahead) wraps to about -2.5e17ns.
func TestBreakersLoadFarFutureValue(t *testing.T) {
	m, s := pinnedShared(t)
	m.HSet(sharedKey, "o:far", "20000000000000", "g:far", "20000000000000")
	for _, r := range load(t, s) {
		if r.Open < 0 || r.Gate < 0 || r.Open == 0 && r.Gate == 0 {
			t.Fatalf("Load returned %+v; want positive durations (or nothing)", r)
		}
	}
}

// When Redis goes away, calls fail fast with ErrSharedUnavailable, OnError
// and the log say so once, and Redis is left alone for ProbeEvery; then one
// call probes; once Redis is back, the probe succeeds and says so.
func TestBreakersRedisDownAndBack(t *testing.T) {
	m := miniredis.RunT(t)
	m.SetTime(t0)
	addr := m.Addr()
	redisDo := miniredisOutside(t, m)

	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const timeout, probeEvery = 5 * time.Second, time.Minute
		c, rt := redistest.CountedClient(t, addr) // closed by t's cleanup, in the bubble
		var calls redistest.Errors
		var logs redistest.Log
		s := newTestShared(t, c, sharedKey, breaker.SharedConfig{Timeout: timeout, ProbeEvery: probeEvery,
			OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		must(t, "PublishOpen", s.PublishOpen(ctx, "a", time.Hour))
		if rs := load(t, s); len(rs) != 1 || rs[0].Open != time.Hour {
			t.Fatalf("Load = %+v; want a open for 1h", rs)
		}

		redisDo(t, "close")
		rt.Evals.Store(0)
		start := time.Now()
		rs, err := s.Load(ctx)
		if !errors.Is(err, breaker.ErrSharedUnavailable) || rs != nil {
			t.Fatalf("Load with Redis down = %+v, %v; want ErrSharedUnavailable", rs, err)
		}
		if d := time.Since(start); d > timeout {
			t.Fatalf("Load with Redis down took %v (virtual time); want at most the Timeout, %v", d, timeout)
		}
		if n := rt.Evals.Load(); n != 1 {
			t.Fatalf("%d round trips; want 1", n)
		}
		wantDown(t, s.Available(), &calls, breaker.ErrSharedUnavailable)
		wantWarn := `level=WARN msg="backstop: shared breaker state unavailable, using local state" key=` + sharedKey
		if got := logs.String(); strings.Count(got, "level=") != 1 || !strings.Contains(got, wantWarn) {
			t.Fatalf("log:\n%s\nwant one record: %s", got, wantWarn)
		}

		// Left alone for ProbeEvery: every method fails at once.
		leftAlone := func(when string) {
			t.Helper()
			before := rt.Evals.Load()
			start := time.Now()
			_, lerr := s.Load(ctx)
			for i, err := range []error{lerr, s.PublishOpen(ctx, "a", time.Second),
				s.PublishGate(ctx, "a", time.Second), s.PublishClosed(ctx, "a")} {
				if !errors.Is(err, breaker.ErrSharedUnavailable) || !strings.Contains(err.Error(), "ProbeEvery (1m0s)") {
					t.Fatalf("%s: call %d: %v; want ErrSharedUnavailable naming ProbeEvery", when, i, err)
				}
			}
			if n := rt.Evals.Load() - before; n != 0 {
				t.Fatalf("%s: %d round trips; want none", when, n)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("%s: the calls took %v (virtual time); want none", when, d)
			}
		}
		leftAlone("right after the failure")
		time.Sleep(probeEvery - time.Millisecond)
		leftAlone("just before ProbeEvery")

		// After ProbeEvery one call probes; Redis is still down.
		time.Sleep(time.Millisecond)
		if _, err := s.Load(ctx); !errors.Is(err, breaker.ErrSharedUnavailable) || strings.Contains(err.Error(), "ProbeEvery") {
			t.Fatalf("the probe: %v; want ErrSharedUnavailable from a round trip", err)
		}
		if n := rt.Evals.Load(); n != 2 {
			t.Fatalf("%d round trips after ProbeEvery; want 2 (one probe)", n)
		}
		leftAlone("after the failed probe")
		if n := len(calls.Get()); n != 1 || strings.Count(logs.String(), "level=") != 1 {
			t.Fatalf("a failed probe reported again: %d OnError calls, log:\n%s", n, logs.String())
		}

		// Redis is back, but is left alone until ProbeEvery has passed.
		redisDo(t, "restart")
		leftAlone("Redis back, before ProbeEvery")
		time.Sleep(probeEvery)
		rs = load(t, s) // the probe
		if len(rs) != 1 || rs[0] != (remote.Published{Name: "a", Open: time.Hour}) {
			t.Fatalf("Load after Redis came back = %+v; want a open for 1h (what was published before)", rs)
		}
		if n := rt.Evals.Load(); n != 3 {
			t.Fatalf("%d round trips; want 3", n)
		}
		if !s.Available() {
			t.Fatal("not Available() after Redis answered again")
		}
		if errs := calls.Get(); len(errs) != 2 || errs[1] != nil {
			t.Fatalf("OnError calls: %v; want a second one with nil", errs)
		}
		wantInfo := `level=INFO msg="backstop: shared breaker state available again, using shared state" key=` + sharedKey
		if got := logs.String(); strings.Count(got, "level=") != 2 || !strings.Contains(got, wantInfo) {
			t.Fatalf("log:\n%s\nwant a second record: %s", got, wantInfo)
		}
		// Every call makes its round trip again.
		must(t, "PublishClosed", s.PublishClosed(ctx, "a"))
		if rs := load(t, s); len(rs) != 0 {
			t.Fatalf("Load = %+v; want nothing", rs)
		}
		if n := rt.Evals.Load(); n != 5 {
			t.Fatalf("%d round trips; want 5", n)
		}
		if n := len(calls.Get()); n != 2 {
			t.Fatalf("%d OnError calls; want still 2", n)
		}
	})
}

// A Redis that answers with an error is unavailable too, and the error
// says why. While the error lasts, each probe that finds it logs it again
// (at most once per ProbeEvery): a reply that waiting does not mend is
// never reported only once.
func TestBreakersRedisError(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		c, rt := redistest.CountedClient(t, m.Addr())
		var calls redistest.Errors
		var logs redistest.Log
		const probeEvery = time.Minute
		s := newTestShared(t, c, sharedKey, breaker.SharedConfig{ProbeEvery: probeEvery, OnError: calls.Add,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		m.SetError("NOPERM this user has no permissions to run the 'evalsha' command")
		defer m.SetError("")
		if _, err := s.Load(context.Background()); !errors.Is(err, breaker.ErrSharedUnavailable) || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("Load: %v; want ErrSharedUnavailable with Redis's NOPERM error", err)
		}
		if errs := calls.Get(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "NOPERM") || s.Available() {
			t.Fatalf("OnError calls %v, Available %v; want one with NOPERM, false", errs, s.Available())
		}
		for probe := 1; probe <= 3; probe++ {
			if _, err := s.Load(context.Background()); !strings.Contains(err.Error(), "ProbeEvery") {
				t.Fatalf("before probe %d: %v; want Redis left alone", probe, err)
			}
			time.Sleep(probeEvery)
			if _, err := s.Load(context.Background()); !strings.Contains(err.Error(), "NOPERM") {
				t.Fatalf("probe %d: %v; want NOPERM again", probe, err)
			}
			if got := strings.Count(logs.String(), "still unavailable, Redis answers with an error"); got != probe {
				t.Fatalf("after probe %d: %d records of the lasting error; want %d:\n%s", probe, got, probe, logs.String())
			}
		}
		if n, errs := rt.Evals.Load(), calls.Get(); n != 4 || len(errs) != 1 {
			t.Fatalf("%d round trips, OnError calls %v; want 4 (the failure, 3 probes) and still one call", n, errs)
		}
	})
}

// Found in review (issue 12, item 6): a value of another type on the key (a
// string SET there) made every round trip fail WRONGTYPE: one Warn, then
// the replicas decided alone for good. The key is the Shared's: every
// script deletes such a value and goes on (a write writes its publication
// into a new hash), Redis stays available, and each repair is logged.
func TestBreakersWrongTypeKeyIsRepaired(t *testing.T) {
	ctx := context.Background()
	m, c, _ := pinnedRedis(t)
	var calls redistest.Errors
	var logs redistest.Log
	s := newTestShared(t, c, sharedKey, breaker.SharedConfig{OnError: calls.Add,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i, tc := range []struct {
		op   string
		call func() error
		want []remote.Published
	}{
		{"Load", func() error { _, err := s.Load(ctx); return err }, nil},
		{"PublishOpen", func() error { return s.PublishOpen(ctx, "a", time.Minute) }, []remote.Published{{Name: "a", Open: time.Minute}}},
		{"PublishGate", func() error { return s.PublishGate(ctx, "a", time.Second) }, []remote.Published{{Name: "a", Gate: time.Second}}},
		{"PublishClosed", func() error { return s.PublishClosed(ctx, "a") }, nil},
	} {
		m.Del(sharedKey)
		var err error
		if i%2 == 0 {
			err = m.Set(sharedKey, "x")
		} else {
			_, err = m.Lpush(sharedKey, "x")
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.call(); err != nil {
			t.Fatalf("%s on a key holding another type: %v; want it repaired", tc.op, err)
		}
		if rs := load(t, s); !slices.Equal(rs, tc.want) {
			t.Fatalf("after %s: Load = %+v; want %+v", tc.op, rs, tc.want)
		}
		if m.Exists(sharedKey) && (m.Type(sharedKey) != "hash" || m.TTL(sharedKey) <= 0) {
			t.Fatalf("after %s: the key is a %s with TTL %v; want a hash that expires", tc.op, m.Type(sharedKey), m.TTL(sharedKey))
		}
		if got := strings.Count(logs.String(), "level=WARN"); got != i+1 {
			t.Fatalf("after %s: %d Warn records; want %d, one per repair:\n%s", tc.op, got, i+1, logs.String())
		}
	}
	if got := logs.String(); !strings.Contains(got, "the key held a string") || !strings.Contains(got, "the key held a list") {
		t.Fatalf("the repairs do not name what the key held:\n%s", got)
	}
	if errs := calls.Get(); len(errs) != 0 || !s.Available() {
		t.Fatalf("OnError calls %v, Available %v; want none, true: Redis answered every round trip", errs, s.Available())
	}
}

// Found in review (issue 12, item 6): a hash written on the key without a
// TTL (by hand, by another program) lived for good while replicas only
// read it. A read sets it to expire with its last field, or deletes it
// when none is left.
func TestBreakersKeyWithoutTTLGetsOne(t *testing.T) {
	m, s := pinnedShared(t)
	m.HSet(sharedKey, "o:a", strconv.FormatInt(t0.Add(300*24*time.Hour).UnixMilli(), 10), "g:a", "1")
	if rs := load(t, s); len(rs) != 1 || rs[0].Open != 300*24*time.Hour {
		t.Fatalf("Load = %+v; want a open for 300 days (each replica caps it: see OpenElsewhere)", rs)
	}
	if ttl := m.TTL(sharedKey); ttl != 300*24*time.Hour {
		t.Fatalf("TTL after a read = %v; want the last field's 300 days", ttl)
	}
	m.Del(sharedKey)
	m.HSet(sharedKey, "junk", "x", "o:ended", "1")
	if rs := load(t, s); len(rs) != 0 || m.Exists(sharedKey) {
		t.Fatalf("Load = %+v, key exists %v; want nothing, and the key without a TTL or a live field deleted", rs, m.Exists(sharedKey))
	}
}

// A caller's ended context returns the context's error and says nothing
// about Redis: whether it ended before the call or during its round trip.
func TestBreakersCallerCanceled(t *testing.T) {
	t.Run("before the call", func(t *testing.T) {
		m := miniredis.RunT(t)
		c, rt := redistest.CountedClient(t, m.Addr())
		var calls redistest.Errors
		var logs redistest.Log
		s := newTestShared(t, c, sharedKey, breaker.SharedConfig{OnError: calls.Add,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, lerr := s.Load(ctx)
		for i, err := range []error{lerr, s.PublishOpen(ctx, "a", time.Second),
			s.PublishGate(ctx, "a", time.Second), s.PublishClosed(ctx, "a")} {
			if !errors.Is(err, context.Canceled) || errors.Is(err, breaker.ErrSharedUnavailable) {
				t.Fatalf("call %d: %v; want context.Canceled, not ErrSharedUnavailable", i, err)
			}
		}
		if n := rt.Evals.Load(); n != 0 || !s.Available() || len(calls.Get()) != 0 || logs.String() != "" {
			t.Fatalf("%d round trips, Available %v, OnError %v, log %q; want none, true, none, empty",
				n, s.Available(), calls.Get(), logs.String())
		}
		// Redis was not marked unavailable: the next call goes through.
		if rs := load(t, s); len(rs) != 0 || rt.Evals.Load() != 1 {
			t.Fatalf("Load = %+v after %d round trips; want nothing after 1", rs, rt.Evals.Load())
		}
	})
	t.Run("during the round trip", func(t *testing.T) {
		addr := redistest.Silent(t)
		c, _ := redistest.CountedClient(t, addr)
		var calls redistest.Errors
		var logs redistest.Log
		s := newTestShared(t, c, sharedKey, breaker.SharedConfig{Timeout: time.Hour, OnError: calls.Add,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		rs, err := s.Load(ctx)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, breaker.ErrSharedUnavailable) || rs != nil {
			t.Fatalf("Load = %+v, %v; want the caller's context.DeadlineExceeded, not ErrSharedUnavailable", rs, err)
		}
		if !s.Available() || len(calls.Get()) != 0 || logs.String() != "" {
			t.Fatalf("Available %v, OnError %v, log %q; want true, none, empty", s.Available(), calls.Get(), logs.String())
		}
	})
}

// A Redis that accepts connections and never answers costs a call the
// Timeout, not the client's ReadTimeout, and the error says so.
func TestBreakersSlowRedis(t *testing.T) {
	addr := redistest.Silent(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true,
		ReadTimeout: time.Hour, WriteTimeout: time.Hour, DialTimeout: time.Hour})
	rt := &redistest.RoundTrips{}
	c.AddHook(rt)
	t.Cleanup(func() { _ = c.Close() })
	var calls redistest.Errors
	s := newTestShared(t, c, sharedKey, breaker.SharedConfig{Timeout: 50 * time.Millisecond, ProbeEvery: time.Hour,
		OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	rs, err := s.Load(context.Background())
	if !errors.Is(err, breaker.ErrSharedUnavailable) || !strings.Contains(err.Error(), "no answer from Redis within the Timeout (50ms)") || rs != nil {
		t.Fatalf("Load against a silent Redis = %+v, %v; want ErrSharedUnavailable naming the Timeout", rs, err)
	}
	if errs := calls.Get(); len(errs) != 1 || !errors.Is(errs[0], breaker.ErrSharedUnavailable) || s.Available() {
		t.Fatalf("OnError calls %v, Available %v; want one, false", errs, s.Available())
	}
	// Then it is left alone: no second wait.
	if err := s.PublishOpen(context.Background(), "a", time.Second); !errors.Is(err, breaker.ErrSharedUnavailable) || rt.Evals.Load() != 1 {
		t.Fatalf("PublishOpen: %v after %d round trips; want ErrSharedUnavailable after 1", err, rt.Evals.Load())
	}
}

// The repairs on a real Redis (its Lua, not miniredis's): a string on the
// key is deleted by a read and by a write, and a hash without a TTL gets
// one from a read.
func TestBreakersRepairsOnARealRedis(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	key := redistest.Prefix(t) + "breakers"
	var logs redistest.Log
	s := newTestShared(t, c, key, breaker.SharedConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	must(t, "SET", c.Set(ctx, key, "x", 0).Err())
	if rs := load(t, s); len(rs) != 0 || c.Exists(ctx, key).Val() != 0 {
		t.Fatalf("Load of a string: %+v, key exists %d; want nothing, the key deleted", rs, c.Exists(ctx, key).Val())
	}
	must(t, "SET", c.Set(ctx, key, "x", 0).Err())
	must(t, "PublishOpen", s.PublishOpen(ctx, "a", time.Minute))
	if rs := load(t, s); len(rs) != 1 || rs[0].Name != "a" || rs[0].Open <= 0 {
		t.Fatalf("Load after a publication over a string: %+v; want a open", rs)
	}
	if n := strings.Count(logs.String(), "the key held a string"); n != 2 {
		t.Fatalf("%d repair records; want 2:\n%s", n, logs.String())
	}
	must(t, "DEL", c.Del(ctx, key).Err())
	must(t, "HSET", c.HSet(ctx, key, "o:a", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)).Err())
	load(t, s)
	if d := c.PTTL(ctx, key).Val(); d <= 0 || d > time.Hour {
		t.Fatalf("PTTL after a read of a hash without one = %v; want about an hour", d)
	}
	if !s.Available() {
		t.Fatal("Redis marked unavailable by a repair")
	}
}

// Found in review: a round trip cut by the caller's own deadline (shorter than the
// Timeout) is blamed on Redis when the network read times out just before
// the caller's context reports it: Redis is declared unavailable (Warn log,
// OnError, the metric) and left alone for ProbeEvery, after a 10ms wait
// that the error calls "no answer within the Timeout (50ms)".
func TestBreakersCallerDeadlineNotBlamedOnRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Every read times out a microsecond before the deadline go-redis
		// set: the ordering the commit a752042 describes ("the read timed
		// out just before the context did"), made deterministic.
		c := redistest.SilentClient(t, func() net.Conn { return &redistest.SilentConn{Early: time.Microsecond} })
		var calls redistest.Errors
		s, err := breaker.NewShared(store(t, c).Breakers(sharedKey), breaker.SharedConfig{Timeout: 50 * time.Millisecond, ProbeEvery: time.Hour,
			OnError: calls.Add, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, lerr := s.Load(ctx)
		if errs := calls.Get(); len(errs) != 0 || !s.Available() {
			t.Errorf("Load under a 10ms caller deadline (Timeout 50ms) = %v; OnError %v, Available %v; want no OnError and Redis still available",
				lerr, errs, s.Available())
		}
	})
}
