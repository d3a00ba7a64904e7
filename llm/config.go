package llm

import "errors"

// ErrInvalidConfig is matched, with errors.Is, by every configuration
// error of the module: chain's Build, every constructor and every
// Validate method (breaker, budget, cache, hedge, redisstore, retry,
// throttle...). Each such error also names the package that found the
// problem and what to change, such as "breaker: invalid configuration:
// FailureRatio 1.5 is above 1".
var ErrInvalidConfig = errors.New("invalid configuration")
