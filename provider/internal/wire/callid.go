package wire

import (
	"strconv"

	"github.com/backstop-llm/backstop/llm"
)

// CallIDs names the tool calls of one answer so that every id the caller
// is given is unique in the conversation: the request's history (the ids
// of its tool calls and of its tool results) and the answer's calls so
// far. A conversation moves between providers, and a provider knows
// nothing of the ids the others issued (call_1 from an OpenAI-compatible
// server, a Gemini call the adapter named), nor is every provider careful
// to issue distinct ids in one answer. Two calls sharing an id cannot both
// be answered: the next turn would be refused by every provider.
//
// ID is called once per call, in the order the calls are delivered (a
// stream's chunk by chunk). A provider's id that is still free is kept; a
// taken one is renamed <id>_2, <id>_3, … (the first free one; cut to stay
// within 40 bytes when the provider's id was of the shape every provider
// takes, so that it is still sent as it is); a call without an id is
// named call_<n>, n counting the tool calls of the conversation (the
// history's, then the answer's), or the next free n. The names depend on
// the history and the ids sent alone: the same answer to the same request
// is named alike.
//
// A renamed id needs no way back to the provider's own: no API keeps ids
// across requests (Chat Completions, the Responses API without
// previous_response_id, the Messages API, Bedrock and Vertex alike, and
// Gemini pair a call with its result within the request), so the id only
// has to be the same on a call and on its result, which it is since the
// caller replays it on both; mapping it back would send the duplicate the
// rename avoids. ToolIDs still translates it going out when a provider
// refuses its shape.
//
// The zero CallIDs has no history. It allocates nothing until the first
// call is named.
type CallIDs struct {
	// Key, when set, returns the part of an id that must be unique, for an
	// adapter whose ids carry more than the provider's id (genai appends a
	// thought signature); nil is the whole id.
	Key func(id string) string

	history []llm.Message
	back    *ToolIDs
	taken   map[string]struct{} // the keys of the conversation's ids; nil until the first ID
	n       int                 // tool calls of the history and of the answer so far
}

// maxID is the longest id every provider takes as it is (OpenAI's 40
// bytes; see IDChars).
const maxID = 40

// NewCallIDs returns the namer of the calls of an answer to a request whose
// conversation is history. back, when not nil, is the request's id
// translation: an id the provider sends is turned back into the caller's
// (ToolIDs.Back) before it is judged.
func NewCallIDs(history []llm.Message, back *ToolIDs) CallIDs {
	return CallIDs{history: history, back: back}
}

// ID returns the id the caller is given for the next call of the answer,
// which the provider sent with the id sent ("" for none).
func (c *CallIDs) ID(sent string) string {
	if c.taken == nil {
		c.load()
	}
	id := sent
	if c.back != nil && id != "" {
		id = c.back.Back(id)
	}
	switch {
	case id == "":
		for n := c.n; ; n++ {
			if id = "call_" + strconv.Itoa(n); c.free(id) {
				break
			}
		}
	case !c.free(id):
		id = c.rename(id)
	}
	c.take(id)
	c.n++
	return id
}

// load takes the ids of the history.
func (c *CallIDs) load() {
	c.taken = map[string]struct{}{}
	for i := range c.history {
		for _, p := range c.history[i].Parts {
			switch {
			case p.ToolCall != nil:
				c.take(p.ToolCall.ID)
				c.n++
			case p.ToolResult != nil:
				c.take(p.ToolResult.CallID)
			}
		}
	}
}

// rename returns the first free <id>_k, k from 2.
func (c *CallIDs) rename(id string) string {
	fits := IDChars(id, maxID)
	for k := 2; ; k++ {
		suffix := "_" + strconv.Itoa(k)
		base := id
		if fits && len(base)+len(suffix) > maxID {
			base = base[:maxID-len(suffix)]
		}
		if out := base + suffix; c.free(out) {
			return out
		}
	}
}

func (c *CallIDs) key(id string) string {
	if c.Key != nil {
		return c.Key(id)
	}
	return id
}

func (c *CallIDs) free(id string) bool {
	_, ok := c.taken[c.key(id)]
	return !ok
}

func (c *CallIDs) take(id string) { c.taken[c.key(id)] = struct{}{} }
