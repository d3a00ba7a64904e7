// Package affinity is a chain's memory of prompt caches: for each
// conversation (its prefix, Table.Key), which targets hold its cached prefix,
// how many tokens of it, and until when. The chain ranks a spreading
// tier's warm target first (affinity) and prices what leaving it cost
// (cost.Cost.CacheLost); docs/concepts.md ("Prompt caches") is the user's
// account.
package affinity

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"

	"github.com/backstop-llm/backstop/llm"
)

// Size is how many conversations a Table remembers: the least recently
// used is forgotten first. An entry takes about 64 bytes.
const Size = 10_000

// TTL is how long a target's cache is taken to live after the last answer
// that read or wrote it: the providers' default prompt-cache lifetime (5
// minutes on Anthropic, and at least that on OpenAI), refreshed, as theirs
// is, by each hit.
const TTL = 5 * time.Minute

// Slots is how many targets an entry remembers for one conversation: the
// one that held its cache and the one a failover wrote it on again.
const Slots = 2

// Slot is one target holding a conversation's cache: the target's index
// in its chain, the tokens cached (read and written by its latest answer)
// and when the cache is taken to expire, on the chain's clock. A slot of
// no Tokens is empty.
type Slot struct {
	Target int
	Tokens int
	Until  time.Duration
}

// Entry is a conversation's slots, live ones only as Table returns them.
type Entry [Slots]Slot

// Table is a bounded memory of conversations' caches, safe for
// concurrent use. Times are read on the chain's clock (durations since an
// epoch of its choosing).
type Table struct {
	seed maphash.Seed
	mu   sync.Mutex
	lru  *simplelru.LRU[uint64, Entry]
}

// New returns an empty Table of Size conversations.
func New() *Table {
	l, _ := simplelru.NewLRU[uint64, Entry](Size, nil) // fails only for a size below 1
	return &Table{seed: maphash.MakeSeed(), lru: l}
}

// Visit returns the live slots of conversation key at now and, when
// tokens is positive (an answer of target's read or wrote that many
// cached tokens), then notes target as holding them until now+TTL: its
// own slot refreshed, or the expired or least recently refreshed one
// taken.
func (t *Table) Visit(key uint64, target, tokens int, now time.Duration) Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var e Entry
	var ok bool
	if tokens > 0 {
		e, ok = t.lru.Get(key)
	} else {
		e, ok = t.lru.Peek(key) // a look alone keeps no conversation alive
	}
	if !ok && tokens <= 0 {
		return Entry{}
	}
	for i := range e {
		if e[i].Until <= now {
			e[i] = Slot{}
		}
	}
	live := e
	if tokens > 0 {
		k := 0
		for i := range e {
			if e[i].Tokens > 0 && e[i].Target == target {
				k = i
				break
			}
			if e[i].Until < e[k].Until {
				k = i
			}
		}
		e[k] = Slot{Target: target, Tokens: tokens, Until: now + TTL}
		t.lru.Add(key, e)
	}
	return live
}

// Key identifies a conversation by what providers cache first: the system
// prompt, the tools (names, descriptions, schemas) and the first message
// (its role, text and media). A conversation keeps its key as it grows
// turn by turn, its later messages appended; two conversations that begin
// alike share one, as they share the provider's cached prefix. Keys are
// the table's own (its seed's).
func (t *Table) Key(req *llm.Request) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(req.System)
	h.WriteByte(0)
	for i := range req.Tools {
		tl := &req.Tools[i]
		h.WriteString(tl.Name)
		h.WriteByte(0)
		h.WriteString(tl.Description)
		h.WriteByte(0)
		h.Write(tl.InputSchema)
		h.WriteByte(0)
	}
	h.WriteByte(1)
	if len(req.Messages) > 0 {
		m := &req.Messages[0]
		h.WriteString(string(m.Role))
		h.WriteByte(0)
		h.WriteString(m.Content)
		for j := range m.Parts {
			p := &m.Parts[j]
			h.WriteByte(0)
			h.WriteString(p.Text)
			if p.Media != nil {
				h.WriteString(p.Media.URL)
				h.Write(p.Media.Data)
			}
		}
	}
	return h.Sum64()
}
