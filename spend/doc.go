// Package spend owns money budgets: a limit on what a key (a tenant, a
// user, a feature, chosen by the caller and taken from the context) may
// spend per period, enforced before each attempt rather than noticed
// after it.
//
// A Budget is a policy.Policy. Before an attempt is sent it reserves the
// attempt's worst case (policy.Attempt.WorstCase: the estimated prompt
// and the output limit at the target's prices); once the attempt ends it
// settles what the attempt really cost (policy.Outcome.Cost) and releases
// the rest; an attempt that was not sent releases all of it. Spend can
// therefore pass the limit only by what the attempts in flight when it is
// reached cost beyond their worst case (a prompt the estimate
// undercounted): one attempt's underestimate with one in flight, however
// many calls race for the last dollar, since a reservation that does not
// fit is refused atomically.
//
// When a budget cannot cover an attempt it either degrades (the call
// moves on to a target whose worst case fits, or to the chain's
// degradations) or refuses (the call ends with an *ExceededError), as
// its Config says.
//
// The spend is kept in a Store: in process by default, or on Redis for
// many replicas (redisstore.Store.Spend, wrapped by Shared so that a Redis
// outage never blocks a call).
package spend
