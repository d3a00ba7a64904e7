package share_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/share"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// keys records the keys the stores are built on.
type keys struct {
	*redisstore.Store
	breakers, budgets []string
}

func (k *keys) Breakers(key string) breaker.Store {
	k.breakers = append(k.breakers, key)
	return k.Store.Breakers(key)
}

func (k *keys) Budget(key string) budget.Store {
	k.budgets = append(k.budgets, key)
	return k.Store.Budget(key)
}

func store(t *testing.T) *keys {
	t.Helper()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	s, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	return &keys{Store: s}
}

func target(t *testing.T, name string) share.Target {
	t.Helper()
	b, err := breaker.New(name, breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return share.Target{Name: name, Breaker: b, Gate: &breaker.Gate{}}
}

// The keys name the chain and each target with their '%' and ':'
// escaped; a target with its own budget gets no shared one, and targets
// with one hedge key share one hedge budget.
func TestBuildKeys(t *testing.T) {
	s := store(t)
	a, own, b, solo := target(t, "a%b"), target(t, "own"), target(t, "b"), target(t, "solo")
	own.OwnBudget = true
	a.HedgeKey, b.HedgeKey, solo.HedgeKey = "tier:deployment", "tier:deployment", "solo"
	got, problems := share.Build(s, share.Config{Prefix: "pre", Chain: "eu:support"}, []share.Target{a, own, b, solo})
	if len(problems) != 0 || got.State == nil {
		t.Fatalf("problems %v, state %v; want none, and the state", problems, got.State)
	}
	if want := []string{"pre:eu%3Asupport:breakers"}; !slices.Equal(s.breakers, want) {
		t.Errorf("breaker keys %q; want %q", s.breakers, want)
	}
	want := []string{"pre:eu%3Asupport:a%25b:budget", "pre:eu%3Asupport:b:budget", "pre:eu%3Asupport:solo:budget",
		"pre:eu%3Asupport:tier%3Adeployment:hedge", "pre:eu%3Asupport:solo:hedge"}
	if !slices.Equal(s.budgets, want) {
		t.Errorf("budget keys %q; want %q", s.budgets, want)
	}
	if len(got.Budgets) != 4 || got.Budgets[0] == nil || got.Budgets[1] != nil || got.Budgets[2] == nil || got.Budgets[2] == got.Budgets[0] {
		t.Errorf("Budgets %v; want one of each target's own, none for the target that has its own", got.Budgets)
	}
	if len(got.Hedges) != 2 || got.Hedges["tier:deployment"] == nil || got.Hedges["solo"] == nil {
		t.Errorf("Hedges %v; want one per hedge key", got.Hedges)
	}
}

func TestBuildProblems(t *testing.T) {
	bad := share.Config{Prefix: "p", Chain: "c", Refresh: -1, Budget: budget.RatioConfig{Ratio: -1}, Hedge: budget.RatioConfig{Window: -1}}
	_, problems := share.Build(nil, bad, nil)
	var what []string
	for _, p := range problems {
		if p.Target != "" {
			t.Errorf("problem %v names target %q; want the chain's", p, p.Target)
		}
		what = append(what, p.What)
		if p.Err != nil && !errors.Is(p.Err, llm.ErrInvalidConfig) {
			t.Errorf("%s: %v does not match llm.ErrInvalidConfig", p.What, p.Err)
		}
	}
	want := []string{"Shared: Refresh is -1ns; it must not be negative (0 means 100ms)", "Shared: Budget is invalid", "Shared: Hedge is invalid",
		"Shared: the store is nil; build one with redisstore.New(client), and check its error"}
	if !slices.Equal(what, want) {
		t.Errorf("problems %q; want %q", what, want)
	}
	_, problems = share.Build((*redisstore.Store)(nil), share.Config{Prefix: "p", Chain: "c"}, nil)
	if len(problems) != 1 || !strings.Contains(problems[0].What, "builds no breaker store") {
		t.Errorf("a nil *redisstore.Store: %v; want the one problem that it builds no breaker store", problems)
	}
	_, problems = share.Build(store(t), share.Config{Prefix: "p", Chain: "c", Timeout: -1}, nil)
	if len(problems) != 1 || problems[0].What != "Shared is invalid" || !strings.Contains(problems[0].Err.Error(), "Timeout is -1ns") {
		t.Errorf("a negative Timeout: %v; want the breakers' problem", problems)
	}
}
