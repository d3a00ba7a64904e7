package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/synctest"

	"go.uber.org/goleak"

	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/redisstore"
)

// TestMain fails the tests if a goroutine outlives them: the fakes and
// the Redis clients are closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The scenario runs in testing/synctest bubbles, on the fakes served in
// process: the primary's retry backoff passes in virtual time.

// TestRefundRunsOnce plays the scenario on the default ledger (in
// memory) and checks the account it prints: the refund issued once, the
// primary's outage and the fallback, then the retry replaying both steps,
// the read-only tool run again, the refund replayed, one refund paid.
func TestRefundRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		if err := run(context.Background(), &out, options{}); err != nil {
			t.Fatalf("%v\n%s", err, &out)
		}
		checkAccount(t, out.String())
	})
}

// TestRefundRunsOnceOnRedis plays it on the shared ledger, on a real
// Redis (failing under CI=true when none answers), as the example does
// when $BACKSTOP_REDIS_ADDR answers.
func TestRefundRunsOnceOnRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, err := redisstore.New(redistest.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		shared, err := ledger.NewShared(store.Ledger(redistest.Prefix(t)+"ledger"), ledger.SharedConfig{})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := run(context.Background(), &out, options{Ledger: shared, LedgerSays: "on Redis"}); err != nil {
			t.Fatalf("%v\n%s", err, &out)
		}
		if !strings.HasPrefix(lines(out.String())[1], "Ledger: on Redis.") {
			t.Errorf("the account does not name the ledger:\n%s", &out)
		}
		checkAccount(t, out.String())
	})
}

// TestRetryWithoutTheLedgerRefundsTwice: the retry lands on a replica
// whose ledger is its own (not shared), which never saw the first
// request: the model is asked again, calls the refund again, and the
// refund tool runs a second time. The example fails, saying so.
func TestRetryWithoutTheLedgerRefundsTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		err := run(context.Background(), &out, options{Retry: ledger.NewMemory()})
		if err == nil || !strings.Contains(err.Error(), "the refund tool ran 2 times") {
			t.Fatalf("err = %v, want the refund tool ran 2 times\n%s", err, &out)
		}
		if n := strings.Count(out.String(), "payments  refund r_1 issued"); n != 2 {
			t.Errorf("the payment system was asked %d times, want 2:\n%s", n, &out)
		}
		if !strings.Contains(out.String(), "Payment system: 2 refund requests received") {
			t.Errorf("the account does not count the two refund requests:\n%s", &out)
		}
	})
}

// checkAccount checks the account the scenario printed.
func checkAccount(t *testing.T, out string) {
	t.Helper()
	count := map[string]int{
		// Request 1: the refund runs, the primary fails, the fallback answers.
		"step 3  model     sonnet (anthropic) #1: ok, calls refund {\"order_id\":\"A-1001\",\"cents\":2599}": 1,
		"step 3  ledger    ticket-42/3/0 started by support-1: the tool runs":                                1,
		"step 3  payments  refund r_1 issued: 2599 cents on A-1001 (idempotency key ticket-42/3/0)":          1,
		"step 5  model     sonnet (anthropic) #1: 529 overloaded":                                            1,
		"step 5  model     sonnet (anthropic) #2: 529 overloaded":                                            1,
		"step 5  model     gpt (openai) #1: ok, answers":                                                     1,
		"answer: I have refunded $25.99 for order A-1001 (refund r_1).":                                      1,
		// Request 2: both steps replayed; the model asked once, for the answer.
		"step 1  ledger    ticket-42/1 done: the step is replayed from the ledger, the model is not asked for it": 1,
		"step 3  ledger    ticket-42/3 done: the step is replayed from the ledger, the model is not asked for it": 1,
		"step 3  ledger    ticket-42/3/0 done: the call's recorded result is replayed, the tool is not run again": 1,
		"refund call_3_0 replayed from the ledger, not run again":                                                 1,
		"order_status call_1_0 ran again (read-only: safe to repeat)":                                             1,
		"step 5  model     sonnet (anthropic) #1: ok, answers":                                                    1,
		"answer: Your refund of $25.99 for order A-1001 is issued (refund r_1)":                                   1,
		// Both requests.
		"step 1  orders    A-1001 looked up (read-only)": 2,
		"model     ":   6, // request 1: 4 attempts on Claude, 1 on GPT; request 2: 1 on Claude
		"cost $":       2,
		"issued: ":     1, // the payment system issued one refund, in request 1
		"Run returned": 2,
		"Requests received: Anthropic 5, OpenAI 1.":                                                 1,
		"OpenAI's request carried the tool results call_1_0 and call_3_0":                           1,
		"Payment system: 1 refund request received, 1 refund issued (r_1).":                         1,
		"The refund ran exactly once, through the outage, the failover and the retry.":              1,
		"Run returned: 2 steps, the answer from gpt on openai, cost $0.007316 for 3 model calls":    1,
		"Run returned: 2 steps, the answer from sonnet on anthropic, cost $0.0039 for 1 model call": 1,
	}
	for s, want := range count {
		if got := strings.Count(out, s); got != want {
			t.Errorf("%q appears %d times, want %d", s, got, want)
		}
	}
	if i, j := strings.Index(out, "payments  refund r_1 issued"), strings.Index(out, "529 overloaded"); i < 0 || j < i {
		t.Errorf("the primary should fail after the refund ran")
	}
	if ls := lines(out); ls[len(ls)-1] != "The refund ran exactly once, through the outage, the failover and the retry." {
		t.Errorf("last line %q", ls[len(ls)-1])
	}
	if t.Failed() {
		t.Logf("the account:\n%s", out)
	}
}

func lines(s string) []string { return strings.Split(strings.TrimRight(s, "\n"), "\n") }
