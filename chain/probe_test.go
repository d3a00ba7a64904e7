package chain_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

var probe = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "ping"}}, Params: llm.Params{MaxTokens: 1}}

func TestActiveProbeFindsRecoveryWithoutAUsersCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &timed{name: "eu-1", downUntil: time.Now().Add(7 * time.Second)}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "eu-1", Provider: primary, Model: "sonnet-5", Probe: probe,
				Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{ConsecutiveFailures: 1}}).
			OrDeployment(chain.Target{Name: "eu-2", Provider: &timed{name: "eu-2"}, Model: "sonnet-5"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// The first call opens eu-1's breaker; calls every second after it
		// go to eu-2 while eu-1 is open, none of them its probe.
		served := map[string]int{}
		for range 12 {
			res, err := c.Call(t.Context(), question)
			if err != nil {
				t.Fatal(err)
			}
			served[res.Served.Target]++
			time.Sleep(time.Second)
		}
		// Opened at 0s: probes at 5s (down) and 15s? No: the second
		// opening lasts 10s, so the probe after the 5s failure is due at
		// 15s; the user calls at 1..11s never probe.
		sent := primary.sent()
		if len(sent) != 2 || sent[1].Messages[0].Content != "ping" || sent[1].Model != "sonnet-5" || sent[1].Params.MaxTokens != 1 {
			t.Fatalf("eu-1 was sent %d requests: %+v", len(sent), sent)
		}
		time.Sleep(4 * time.Second) // 16s: the probe at 15s found eu-1 up
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-1" || len(primary.sent()) != 4 {
			t.Fatalf("after recovery: %v %+v, %d requests", err, res.Served, len(primary.sent()))
		}
		if served["eu-1"] != 0 || served["eu-2"] != 12 {
			t.Fatalf("served %v", served)
		}
	})
}

func TestCloseStopsTheProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary := &timed{name: "eu-1", downUntil: time.Now().Add(time.Hour)}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "eu-1", Provider: primary, Model: "m", Probe: probe,
				Retry: retry.Policy{MaxAttempts: 1}, Breaker: breaker.Config{ConsecutiveFailures: 1}}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Call(t.Context(), question)
		time.Sleep(6 * time.Second) // one probe, at 5s
		c.Close()
		time.Sleep(time.Hour)
		if n := len(primary.sent()); n != 2 {
			t.Fatalf("%d requests; want the call and one probe before Close", n)
		}
	})
}

func TestProbeWithoutMessagesIsABuildError(t *testing.T) {
	wantBuildErr(t, chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "x"}, Model: "m",
		Probe: llm.Request{System: "ping"}}), "Probe has no Messages")
}
