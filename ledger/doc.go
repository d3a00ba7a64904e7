// Package ledger owns the record that makes a side effect happen once: for
// each key (an agent step's place in a conversation, chosen by the caller,
// never the model's arguments), whether its side effect has not started,
// has started (by whom, until when), or is done (with the result to
// replay).
//
// A Ledger is asked before a side effect runs (Begin) and told when it
// ends (Finish). A key already done replays its result; a key another
// owner holds is a concurrent duplicate; a key whose owner's lease ran
// out without a Finish is "outcome unknown": the process died or the
// handler hung after it may have acted, and only the caller's own
// recovery can say what happened. Package agent reads it so; other code
// may too.
//
// NewMemory keeps the ledger in process; redisstore.Store.Ledger keeps it
// on Redis for many replicas, wrapped in NewShared, which bounds each
// round trip and refuses every operation while Redis is down rather than
// let a side effect run blind (see Shared).
package ledger
