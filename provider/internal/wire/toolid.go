package wire

import (
	"crypto/sha256"
	"encoding/hex"
)

// ToolIDs translates the tool-call ids of one request for a provider that
// constrains their shape, so that a history whose ids another provider
// issued (toolu_…, call_…, fc_…, or any string a caller made up) is
// accepted: an id the provider takes goes out unchanged; any other goes
// out as Prefix followed by the first hex digits of its SHA-256, the same
// for the call and the result that answers it. Back turns an id the
// provider echoes into the caller's, so the caller only ever sees the ids
// it was given. The zero ToolIDs (no constraint) passes every id through.
type ToolIDs struct {
	// Valid reports whether the provider accepts id as it is.
	Valid func(id string) bool
	// Prefix starts a translated id ("toolu_", "call_").
	Prefix string
	back   map[string]string // translated -> caller's
}

// Out returns the id to send for the caller's id.
func (t *ToolIDs) Out(id string) string {
	if t.Valid == nil || t.Valid(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	out := t.Prefix + hex.EncodeToString(sum[:12])
	if t.back == nil {
		t.back = map[string]string{}
	}
	t.back[out] = id
	return out
}

// Back returns the caller's id for an id the provider sent: the id Out
// translated, or id itself when Out did not translate it.
func (t *ToolIDs) Back(id string) string {
	if orig, ok := t.back[id]; ok {
		return orig
	}
	return id
}

// IDChars reports whether id is 1 to max bytes of letters, digits, _ and -:
// the shape every provider accepts (Anthropic's pattern is
// ^[a-zA-Z0-9_-]+$; OpenAI takes at most 40 bytes).
func IDChars(id string, max int) bool {
	if id == "" || len(id) > max {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
