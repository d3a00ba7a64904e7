// Package agent runs a tool loop over a chain: the model is asked, the
// tools it calls are run (only calls the chain validated), their results
// are sent back, and so on until the model answers without calling a tool
// or the turn limit is reached. Loop.Run returns the whole Result;
// Loop.Stream yields the answer's text, the tools' activity and the
// chain's restarts as they happen.
//
// # Exactly once
//
// A tool with side effects (a refund, a message sent) is marked Once. Each
// of its executions is keyed by its place in the conversation, never by
// the model's arguments:
//
//	<conversation id>/<step>/<call index>
//
// where the step is the number of messages before the assistant turn
// that made the call. The key is the same when the chain retries,
// re-asks, falls back to another provider mid-conversation, or the caller
// retries the whole request with the same Conversation. A ledger
// (ledger.Ledger: in memory by default, on Redis for many replicas)
// records each key Started, then Done with its result:
//
//   - Absent: the tool runs; its result (an error result too) is recorded.
//   - Done: the recorded result is replayed; the tool is not called
//     (ToolRun.Replayed).
//   - Started by another owner whose lease is live (a concurrent
//     duplicate on another replica): the tool's OnDuplicate says whether
//     to Wait for its result or Refuse (the loop ends with ErrDuplicate).
//   - Started, lease ended without a result (the process died, or the
//     handler hung): the outcome is unknown. The key is taken over and the
//     tool's Recover decides (it looks the refund up); the tool is never
//     re-run blind (ToolRun.Recovered). A tool that times out in process
//     is recovered the same way, at once.
//
// The step itself (the assistant turn's text and tool calls) is recorded
// under <conversation id>/<step> before its tools run, so a caller's
// retry of the whole request replays the step from the ledger without
// asking the model again: the model could otherwise choose different
// arguments. Tool calls get ids derived from their place
// (call_<step>_<index>), so the conversation is the same whichever
// provider answered.
//
// While the ledger is unavailable (errors matching ledger.ErrUnavailable)
// no Once tool runs: the loop ends with that error, and the caller retries
// later with the same Conversation.
package agent
