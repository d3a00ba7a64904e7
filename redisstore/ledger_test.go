package redisstore_test

// Tests of the agent ledger's store on Redis (redisstore.Store.Ledger), on
// the real Redis internal/redistest finds (skipped when none answers,
// failed under CI=true).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/redisstore"
)

func TestLedgerNilStore(t *testing.T) {
	if l := (*redisstore.Store)(nil).Ledger("x"); l != nil {
		t.Fatalf("Ledger of a nil Store = %v; want nil", l)
	}
}

// One hash per key, "<name>:<escaped key>", holding state, owner and
// until while started (expiring an hour after the lease), state, owner
// and result once done (expiring after the ttl, or never); the result
// round-trips byte for byte.
func TestLedgerBeginFinishGet(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "ledger"
	l := store(t, c).Ledger(name)
	const key = "conv-81:step-2:call_1"
	rkey := name + ":conv-81%3Astep-2%3Acall_1"

	if e, err := l.Get(ctx, key); err != nil || e.State != ledger.Absent {
		t.Fatalf("Get of a new key = %+v, %v; want Absent", e, err)
	}
	before := time.Now()
	if e, err := l.Begin(ctx, key, "replica-a/1", time.Minute, false); err != nil || e.State != ledger.Absent || e.Owner != "" {
		t.Fatalf("first Begin = %+v, %v; want Absent", e, err)
	}
	h := c.HGetAll(ctx, rkey).Val()
	if h["state"] != "started" || h["owner"] != "replica-a/1" || h["until"] == "" || len(h) != 3 {
		t.Fatalf("hash %q after Begin = %v; want state, owner, until", rkey, h)
	}
	if d := c.PTTL(ctx, rkey).Val(); d <= time.Hour || d > time.Hour+time.Minute {
		t.Fatalf("PTTL of a started key = %v; want the lease plus an hour", d)
	}
	e, err := l.Begin(ctx, key, "replica-b/1", time.Minute, true)
	after := time.Now()
	if err != nil || e.State != ledger.Started || e.Owner != "replica-a/1" || e.Expired(time.Now()) ||
		e.Until.Before(before.Add(time.Minute-time.Second)) || e.Until.After(after.Add(time.Minute+time.Second)) {
		t.Fatalf("Begin within the lease = %+v, %v; want Started by replica-a/1 until about a minute from now", e, err)
	}

	result := []byte("\x00\xff{\"refund\":\"r_1\"}\r\n\x80")
	must(t, "Finish", l.Finish(ctx, key, "replica-a/1", result, time.Hour))
	h = c.HGetAll(ctx, rkey).Val()
	if h["state"] != "done" || h["result"] != string(result) || h["until"] != "" || len(h) != 3 {
		t.Fatalf("hash after Finish = %q; want state, owner, result", h)
	}
	if d := c.PTTL(ctx, rkey).Val(); d <= time.Hour-time.Minute || d > time.Hour {
		t.Fatalf("PTTL of a done key = %v; want the ttl, an hour", d)
	}
	for _, op := range []string{"Get", "Begin"} {
		var e ledger.Entry
		if op == "Get" {
			e, err = l.Get(ctx, key)
		} else {
			e, err = l.Begin(ctx, key, "replica-b/2", time.Minute, true)
		}
		if err != nil || e.State != ledger.Done || e.Owner != "replica-a/1" || !bytes.Equal(e.Result, result) {
			t.Fatalf("%s of a done key = %+v, %v; want Done with the result", op, e, err)
		}
	}
	if err := l.Finish(ctx, key, "replica-a/1", []byte("again"), time.Hour); !errors.Is(err, ledger.ErrNotOwner) ||
		!strings.Contains(err.Error(), rkey) {
		t.Fatalf("Finish of a done key = %v; want ErrNotOwner naming %q", err, rkey)
	}

	// ttl <= 0: kept for good; an empty result reads back as nil.
	must(t, "Begin", errOf(l.Begin(ctx, "k2", "o", time.Minute, false)))
	must(t, "Finish", l.Finish(ctx, "k2", "o", nil, 0))
	if d := c.PTTL(ctx, name+":k2").Val(); d != -1 {
		t.Fatalf("PTTL of a done key with ttl 0 = %v; want none (-1)", d)
	}
	if e, err := l.Get(ctx, "k2"); err != nil || e.State != ledger.Done || e.Result != nil {
		t.Fatalf("Get = %+v, %v; want Done with no result", e, err)
	}
}

func errOf(_ ledger.Entry, err error) error { return err }

// Finish by an owner that does not hold the key (none, or another's)
// changes nothing and returns ErrNotOwner.
func TestLedgerFinishByNonOwner(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "ledger"
	l := store(t, c).Ledger(name)
	if err := l.Finish(ctx, "k", "a", []byte("x"), time.Hour); !errors.Is(err, ledger.ErrNotOwner) {
		t.Fatalf("Finish of an absent key = %v; want ErrNotOwner", err)
	}
	if n := c.Exists(ctx, name+":k").Val(); n != 0 {
		t.Fatalf("Finish of an absent key wrote it")
	}
	must(t, "Begin", errOf(l.Begin(ctx, "k", "a", time.Minute, false)))
	if err := l.Finish(ctx, "k", "b", []byte("x"), time.Hour); !errors.Is(err, ledger.ErrNotOwner) {
		t.Fatalf("Finish by another owner = %v; want ErrNotOwner", err)
	}
	if e, _ := l.Get(ctx, "k"); e.State != ledger.Started || e.Owner != "a" {
		t.Fatalf("after a refused Finish: %+v; want Started by a", e)
	}
}

// Keys that differ only in escaping stay apart.
func TestLedgerKeyEscaping(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "ledger"
	l := store(t, c).Ledger(name)
	for _, k := range []string{"a:b", "a%3Ab", "a%b"} {
		if e, err := l.Begin(ctx, k, "o", time.Minute, false); err != nil || e.State != ledger.Absent {
			t.Fatalf("Begin(%q) = %+v, %v; want Absent: another key's hash", k, e, err)
		}
	}
	for _, rk := range []string{name + ":a%3Ab", name + ":a%253Ab", name + ":a%25b"} {
		if c.Exists(ctx, rk).Val() != 1 {
			t.Fatalf("no hash %q", rk)
		}
	}
}

// Four replicas (a client each), 50 Begins each on the same keys at once:
// exactly one Begin per key is told Absent, and every other finds the
// key started by that one or, once it finished, done with its result.
func TestLedgerConcurrentBegins(t *testing.T) {
	ctx := context.Background()
	name := redistest.Prefix(t) + "ledger"
	var ls []ledger.Ledger
	for range 4 {
		ls = append(ls, store(t, redistest.Client(t)).Ledger(name))
	}
	const keys = 10
	var won [keys]atomic.Int32
	var wg sync.WaitGroup
	for r, l := range ls {
		for i := range 50 {
			wg.Go(func() {
				k := i % keys
				owner := fmt.Sprintf("r%d/%d", r, i)
				e, err := l.Begin(ctx, fmt.Sprint("step-", k), owner, time.Minute, true)
				if err != nil {
					t.Error(err)
					return
				}
				switch e.State {
				case ledger.Absent:
					won[k].Add(1)
					if err := l.Finish(ctx, fmt.Sprint("step-", k), owner, []byte(owner), time.Hour); err != nil {
						t.Error(err)
					}
				case ledger.Started:
					if e.Expired(time.Now()) {
						t.Errorf("a Begin found the key's lease ended: %+v", e)
					}
				case ledger.Done:
					if string(e.Result) != e.Owner {
						t.Errorf("done with %q by %q", e.Result, e.Owner)
					}
				}
			})
		}
	}
	wg.Wait()
	for k := range keys {
		if n := won[k].Load(); n != 1 {
			t.Errorf("key %d: %d Begins were told Absent; want exactly 1", k, n)
		}
	}
}

// A started key whose lease (50ms, on Redis's clock) has ended is outcome
// unknown: Begin without takeover leaves it and reports it Expired; with
// takeover it goes to the new owner (and was reported as it was), and the
// old owner's Finish is refused. Within the lease, takeover is refused.
func TestLedgerTakeoverAfterLease(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "ledger"
	l := store(t, c).Ledger(name)
	const lease = 50 * time.Millisecond
	must(t, "Begin", errOf(l.Begin(ctx, "k", "old", lease, false)))
	if e, _ := l.Begin(ctx, "k", "new", lease, true); e.State != ledger.Started || e.Owner != "old" {
		t.Fatalf("takeover within the lease: found %+v", e)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		e, err := l.Get(ctx, "k")
		must(t, "Get", err)
		if e.State != ledger.Started || e.Owner != "old" {
			t.Fatalf("Get while waiting = %+v; want Started by old", e)
		}
		if e.Expired(time.Now()) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lease of %v has not ended after 5s: %+v", lease, e)
		}
		time.Sleep(5 * time.Millisecond) // real Redis: its clock cannot be faked
	}
	e, err := l.Begin(ctx, "k", "new", lease, false)
	if err != nil || e.State != ledger.Started || e.Owner != "old" || !e.Expired(time.Now()) {
		t.Fatalf("Begin past the lease without takeover = %+v, %v; want Started by old, Expired", e, err)
	}
	e, err = l.Begin(ctx, "k", "new", time.Minute, true)
	if err != nil || e.State != ledger.Started || e.Owner != "old" || !e.Expired(time.Now()) {
		t.Fatalf("takeover = %+v, %v; want it to report the old entry, Expired", e, err)
	}
	if err := l.Finish(ctx, "k", "old", []byte("late"), time.Hour); !errors.Is(err, ledger.ErrNotOwner) {
		t.Fatalf("the old owner's Finish after a takeover = %v; want ErrNotOwner", err)
	}
	if e, _ := l.Get(ctx, "k"); e.State != ledger.Started || e.Owner != "new" || e.Expired(time.Now()) {
		t.Fatalf("after the takeover: %+v; want Started by new, within its lease", e)
	}
	must(t, "Finish", l.Finish(ctx, "k", "new", []byte("ok"), time.Hour))
}

// A value of another type under a key, or a hash without a state, is
// deleted by the next Begin or Finish, which go on as if the key were
// absent, and each repair is logged by the ledger.Shared around the
// store, naming the key; Get reads such a key as Absent.
func TestLedgerRepairsForeignValues(t *testing.T) {
	ctx := context.Background()
	c := redistest.Client(t)
	name := redistest.Prefix(t) + "ledger"
	var logs redistest.Log
	s, err := ledger.NewShared(store(t, c).Ledger(name), ledger.SharedConfig{Timeout: sharedTestTimeout,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	must(t, "ledger.NewShared", err)

	must(t, "SET", c.Set(ctx, name+":a", "not a hash", 0).Err())
	if e, err := s.Get(ctx, "a"); err != nil || e.State != ledger.Absent {
		t.Fatalf("Get of a string = %+v, %v; want Absent", e, err)
	}
	if e, err := s.Begin(ctx, "a", "o", time.Minute, false); err != nil || e.State != ledger.Absent {
		t.Fatalf("Begin over a string = %+v, %v; want Absent", e, err)
	}
	must(t, "Finish", s.Finish(ctx, "a", "o", []byte("r"), time.Hour))

	must(t, "HSET", c.HSet(ctx, name+":b", "something", "else").Err())
	if e, err := s.Begin(ctx, "b", "o", time.Minute, false); err != nil || e.State != ledger.Absent {
		t.Fatalf("Begin over a foreign hash = %+v, %v; want Absent", e, err)
	}
	if h := c.HGetAll(ctx, name+":b").Val(); h["something"] != "" || h["state"] != "started" {
		t.Fatalf("hash after the repair = %v; want only the ledger's fields", h)
	}
	must(t, "LPUSH", c.LPush(ctx, name+":c", "x").Err())
	if err := s.Finish(ctx, "c", "o", []byte("r"), time.Hour); !errors.Is(err, ledger.ErrNotOwner) {
		t.Fatalf("Finish over a list = %v; want ErrNotOwner", err)
	}
	out := logs.String()
	for _, want := range []string{"the key held a string", "the key held a hash without a state", "the key held a list",
		"key=" + name + ":a", "key=" + name + ":b", "key=" + name + ":c"} {
		if !strings.Contains(out, want) {
			t.Fatalf("log:\n%s\nwant %q", out, want)
		}
	}
	if !s.Available() {
		t.Fatal("a repair made the ledger unavailable")
	}
}
