package storm

// The lab's shared pieces: the models, the question every client asks, the
// adapter over the fake provider, chains of one and two tiers, and the
// measures taken from arrival times.

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
)

const (
	primaryModel = "claude-sonnet-5-5"
	siblingModel = "claude-haiku-5"
)

// ask is the request every virtual client sends.
var ask = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}}

// claude is the real Anthropic adapter over the fake provider, in-process,
// so that it works inside a synctest bubble.
func claude(t testing.TB, f *fake.Server) llm.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-storm", BaseURL: f.URL(), HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// build builds a chain of primary alone, or of primary and a healthy
// sibling model on the same fake deployment when sibling is true. Primary's
// Name, Provider and Model are filled in.
func build(t testing.TB, f *fake.Server, primary chain.Target, sibling bool) *chain.Chain {
	t.Helper()
	p := claude(t, f)
	primary.Name, primary.Provider, primary.Model = "primary", p, primaryModel
	b := chain.New("storm").Primary(primary)
	if sibling {
		b = b.OrSibling(chain.Target{Name: "sibling", Provider: p, Model: siblingModel})
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sent counts the attempts of res that reached target as requests.
func sent(res *chain.Result, target string) int {
	n := 0
	for _, a := range res.Attempts {
		if a.Target == target && a.Decision != chain.DecisionSkip {
			n++
		}
	}
	return n
}

// maxInWindow returns the largest number of times in any half-open window
// [t, t+w): the peak load a provider sees over w.
func maxInWindow(times []time.Time, w time.Duration) int {
	ts := append([]time.Time(nil), times...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	best, lo := 0, 0
	for hi := range ts {
		for ts[hi].Sub(ts[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// buckets counts times in consecutive buckets of width w from start; times
// before start are left out.
func buckets(times []time.Time, start time.Time, w time.Duration) []int {
	var out []int
	for _, at := range times {
		d := at.Sub(start)
		if d < 0 {
			continue
		}
		i := int(d / w)
		for len(out) <= i {
			out = append(out, 0)
		}
		out[i]++
	}
	return out
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
