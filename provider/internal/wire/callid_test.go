package wire

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// history is a conversation whose tool calls were named by others: call_1
// (an OpenAI-compatible server's), toolu_01 (Anthropic's), and a foreign
// id an adapter translates before sending it.
func history() []llm.Message {
	return []llm.Message{
		{Role: llm.RoleUser, Content: "weather?"},
		{Role: llm.RoleAssistant, Parts: []llm.Part{
			llm.ToolCallPart("call_1", "get", json.RawMessage(`{}`)),
			llm.ToolCallPart("toolu_01", "get", json.RawMessage(`{}`)),
		}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResultPart("call_1", "sunny", false),
			llm.ToolResultPart("toolu_01", "rainy", false),
		}},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart("functions.get:0", "get", nil)}},
		{Role: llm.RoleUser, Parts: []llm.Part{
			llm.ToolResultPart("functions.get:0", "windy", false),
			llm.ToolResultPart("orphan", "a result whose call is gone", false),
		}},
	}
}

func TestCallIDs(t *testing.T) {
	long := strings.Repeat("a", 40)
	for _, tc := range []struct {
		name       string
		sent, want []string
	}{
		{"fresh ids pass through", []string{"call_2", "toolu_02"}, []string{"call_2", "toolu_02"}},
		{"two calls share one id", []string{"dup", "dup", "dup"}, []string{"dup", "dup_2", "dup_3"}},
		{"an id of the history", []string{"call_1", "toolu_01", "orphan"}, []string{"call_1_2", "toolu_01_2", "orphan_2"}},
		{"a renamed id is itself taken", []string{"call_1_2", "call_1"}, []string{"call_1_2", "call_1_3"}},
		// Id-less calls are call_<n>, n counting the calls of the
		// conversation (3 in the history): call_1 is never made up again.
		{"no id", []string{"", "call_4", ""}, []string{"call_3", "call_4", "call_5"}},
		// A renamed id fits in 40 bytes when the provider's did.
		{"at the length limit", []string{long, long}, []string{long, long[:38] + "_2"}},
		{"past the length limit", []string{long + "b", long + "b"}, []string{long + "b", long + "b_2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCallIDs(history(), nil)
			var got []string
			for _, id := range tc.sent {
				got = append(got, c.ID(id))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ids %q; want %q", got, tc.want)
			}
		})
	}
}

// TestCallIDsTranslated: an id the provider echoes is the caller's again
// (ToolIDs.Back) before it is judged, so an echo of a translated id of the
// history is renamed, in the caller's terms.
func TestCallIDsTranslated(t *testing.T) {
	ids := ToolIDs{Valid: func(id string) bool { return IDChars(id, 40) }, Prefix: "call_"}
	h := history()
	sent := ids.Out("functions.get:0")
	c := NewCallIDs(h, &ids)
	if got := c.ID(sent); got != "functions.get:0_2" {
		t.Errorf("an echo of the translated %q came back as %q", sent, got)
	}
	if got := c.ID("call_9"); got != "call_9" {
		t.Errorf("a fresh id came back as %q", got)
	}
}

// TestCallIDsKey: with Key, two ids that differ only past the part Key
// keeps (genai's thought signatures) are one id.
func TestCallIDsKey(t *testing.T) {
	h := []llm.Message{{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart("call_0~sig~AQID", "get", nil)}}}
	c := NewCallIDs(h, nil)
	c.Key = func(id string) string { base, _, _ := strings.Cut(id, "~sig~"); return base }
	if got := c.ID("call_0"); got != "call_0_2" {
		t.Errorf("call_0 came back as %q; the history holds call_0 with a signature", got)
	}
	if got := c.ID(""); got != "call_2" {
		t.Errorf("an id-less call came back as %q", got)
	}
}

func TestCallIDsZero(t *testing.T) {
	var c CallIDs
	if got := []string{c.ID("a"), c.ID("a"), c.ID("")}; !slices.Equal(got, []string{"a", "a_2", "call_2"}) {
		t.Errorf("zero CallIDs named %q", got)
	}
}

func TestCallIDsAllocs(t *testing.T) {
	h := history()
	if n := testing.AllocsPerRun(100, func() { _ = NewCallIDs(h, nil) }); n != 0 {
		t.Errorf("NewCallIDs allocates %v times; the map waits for a call", n)
	}
}

// FuzzCallIDs: whatever the history and the ids a provider sends, the ids
// handed out are non-empty, distinct, none an id of the history, the same
// for the same input, the provider's own when it was free, and of the
// shape every provider takes (IDChars 40) when the provider's id was.
func FuzzCallIDs(f *testing.F) {
	f.Add("call_1,toolu_01", "call_1,call_1,,x")
	f.Add("", "a,a,a_2,a")
	f.Add("call_0,call_1_2", ",call_1,call_1")
	f.Add(strings.Repeat("z", 40), strings.Repeat("z", 40)+","+strings.Repeat("z", 40))
	f.Fuzz(func(t *testing.T, hist, sent string) {
		var h []llm.Message
		taken := map[string]bool{}
		for i, id := range strings.Split(hist, ",") {
			taken[id] = true
			if i%2 == 0 {
				h = append(h, llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(id, "f", nil)}})
			} else {
				h = append(h, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(id, "r", false)}})
			}
		}
		name := func() []string {
			c := NewCallIDs(h, nil)
			var out []string
			for _, id := range strings.Split(sent, ",") {
				out = append(out, c.ID(id))
			}
			return out
		}
		got := name()
		if again := name(); !slices.Equal(got, again) {
			t.Fatalf("not deterministic: %q then %q", got, again)
		}
		seen := map[string]bool{}
		for i, id := range strings.Split(sent, ",") {
			g := got[i]
			switch {
			case g == "":
				t.Fatalf("call %d (%q) got no id", i, id)
			case taken[g]:
				t.Fatalf("call %d (%q) got %q, an id of the history", i, id, g)
			case seen[g]:
				t.Fatalf("call %d (%q) got %q twice: %q", i, id, g, got)
			case id != "" && !taken[id] && !seen[id] && g != id:
				t.Fatalf("call %d: the free id %q was renamed %q", i, id, g)
			case IDChars(id, 40) && !IDChars(g, 40):
				t.Fatalf("call %d: %q became %q, which OpenAI refuses", i, id, g)
			}
			seen[g] = true
		}
	})
}
