package remote

import (
	"context"
	"log/slog"
)

// repairKey is the context key of a RepairFunc.
type repairKey struct{}

// RepairFunc is told that a store's script found a value of type found
// (Redis's TYPE, such as "string") under key, where it keeps a hash, and
// deleted it before it went on.
type RepairFunc func(key, found string)

// WithRepair returns ctx carrying report, for a store whose interface has
// no room to return a repair (spend.Store): the store tells report of each
// one it makes under ctx (see Repaired). spend.Shared passes its Health's.
func WithRepair(ctx context.Context, report RepairFunc) context.Context {
	return context.WithValue(ctx, repairKey{}, report)
}

// Repaired tells the RepairFunc ctx carries (WithRepair) that the store
// found a value of type found under key and deleted it; without one, it
// logs a Warn record to slog.Default() as Health.Repaired does. what names
// the store in the record ("spend store").
func Repaired(ctx context.Context, what, key, found string) {
	if f, ok := ctx.Value(repairKey{}).(RepairFunc); ok && f != nil {
		f(key, found)
		return
	}
	slog.Default().Warn("backstop: "+what+": the key held a "+found+", not the hash backstop keeps there; deleted it and carried on (give other data another key)",
		"key", key, "type", found)
}

// RepairedKey logs, as Repaired does, the repair of a store key other
// than h's own (a store of many keys, such as spend's).
func (h *Health) RepairedKey(key, found string) {
	h.log().Warn("backstop: "+h.what+": the key held a "+found+", not the hash backstop keeps there; deleted it and carried on (give other data another key)",
		"key", key, "type", found)
}
