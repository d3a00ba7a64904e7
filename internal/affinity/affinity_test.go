package affinity_test

import (
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/affinity"
	"github.com/backstop-llm/backstop/llm"
)

// TestAConversationKeepsItsKeyAsItGrows: appending turns keeps the key;
// another system prompt, tool or first message changes it.
func TestAConversationKeepsItsKeyAsItGrows(t *testing.T) {
	tab := affinity.New()
	base := llm.Request{System: "you are terse", Tools: []llm.Tool{{Name: "f", InputSchema: []byte(`{"type":"object"}`)}},
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "a long document"}}}
	k := tab.Key(&base)
	grown := base
	grown.Messages = append(append([]llm.Message(nil), base.Messages...),
		llm.Message{Role: llm.RoleAssistant, Content: "ok"}, llm.Message{Role: llm.RoleUser, Content: "and then?"})
	if tab.Key(&grown) != k {
		t.Fatal("the conversation's next turn changed its key")
	}
	for name, change := range map[string]func(r *llm.Request){
		"system":        func(r *llm.Request) { r.System = "you are verbose" },
		"tool":          func(r *llm.Request) { r.Tools = []llm.Tool{{Name: "g"}} },
		"first message": func(r *llm.Request) { r.Messages = []llm.Message{{Role: llm.RoleUser, Content: "another document"}} },
	} {
		r := base
		change(&r)
		if tab.Key(&r) == k {
			t.Errorf("another %s kept the key", name)
		}
	}
}

// TestVisitRemembersTheWarmTargetsUntilTheirCacheExpires: a slot per
// target, refreshed by each hit, gone TTL after the last; a look alone
// keeps nothing alive.
func TestVisitRemembersTheWarmTargetsUntilTheirCacheExpires(t *testing.T) {
	tab := affinity.New()
	if e := tab.Visit(1, 0, 0, 0); e != (affinity.Entry{}) {
		t.Fatalf("an unknown conversation has slots: %+v", e)
	}
	tab.Visit(1, 0, 1000, 0)
	e := tab.Visit(1, 3, 1200, time.Minute) // a failover writes it on target 3
	if e[0] != (affinity.Slot{Target: 0, Tokens: 1000, Until: affinity.TTL}) {
		t.Fatalf("before the failover's note: %+v", e)
	}
	e = tab.Visit(1, 0, 0, 2*time.Minute)
	if e[0].Target != 0 || e[1] != (affinity.Slot{Target: 3, Tokens: 1200, Until: time.Minute + affinity.TTL}) {
		t.Fatalf("both warm targets: %+v", e)
	}
	tab.Visit(1, 3, 1300, 4*time.Minute) // a hit refreshes target 3's slot, not target 0's
	e = tab.Visit(1, 0, 0, affinity.TTL)
	if e[0].Tokens != 0 || e[1] != (affinity.Slot{Target: 3, Tokens: 1300, Until: 4*time.Minute + affinity.TTL}) {
		t.Fatalf("after target 0's cache expired: %+v", e)
	}
	tab.Visit(1, 5, 10, affinity.TTL) // takes the expired slot
	if e = tab.Visit(1, 0, 0, affinity.TTL); e[0].Target != 5 || e[1].Target != 3 {
		t.Fatalf("a third target did not take the expired slot: %+v", e)
	}
	if e = tab.Visit(1, 0, 0, 2*affinity.TTL); e != (affinity.Entry{}) {
		t.Fatalf("after every cache expired: %+v", e)
	}
}

// TestTheTableIsBounded: past Size conversations, the least recently
// used is forgotten.
func TestTheTableIsBounded(t *testing.T) {
	tab := affinity.New()
	for k := range uint64(affinity.Size + 1) {
		tab.Visit(k, 0, 1, 0)
	}
	if e := tab.Visit(0, 0, 0, 0); e[0].Tokens != 0 {
		t.Error("the oldest conversation was kept past Size")
	}
	if e := tab.Visit(affinity.Size, 0, 0, 0); e[0].Tokens != 1 {
		t.Error("the newest conversation was forgotten")
	}
}
