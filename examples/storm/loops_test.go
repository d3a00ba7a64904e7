package storm

// The retry loops that are not backstop, written as plain Go around the
// adapter's Complete: the naive loop, the official SDKs' default loop, and
// one layer of a stack of retry layers.

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// naive sends req again at once after every failure until it is answered
// or ctx ends.
func naive(ctx context.Context, p llm.Provider, req llm.Request) (*llm.Response, error) {
	for {
		resp, err := p.Complete(ctx, req)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
	}
}

// SDK-like behaviour, as anthropic-sdk-go and openai-go retry by default
// (PROTOCOLS.md): 2 retries of connection errors, 408, 409, 429 and 5xx,
// x-should-retry first; a Retry-After under a minute is waited in full,
// otherwise 0.5s * 2^n capped at 8s, minus up to 25% jitter.
const (
	sdkMaxRetries = 2
	sdkBase       = 500 * time.Millisecond
	sdkCap        = 8 * time.Second
)

// sdkLike makes one call the way the official SDKs do.
func sdkLike(ctx context.Context, p llm.Provider, req llm.Request) (*llm.Response, error) {
	for n := 0; ; n++ {
		resp, err := p.Complete(ctx, req)
		if err == nil || n >= sdkMaxRetries || !sdkRetryable(err) {
			return resp, err
		}
		if err := sleep(ctx, sdkDelay(err, n)); err != nil {
			return nil, err
		}
	}
}

// sdkRetryable is the SDKs' shouldRetry.
func sdkRetryable(err error) bool {
	var le *llm.Error
	if !errors.As(err, &le) {
		return false
	}
	if le.ShouldRetry != nil {
		return *le.ShouldRetry
	}
	switch {
	case le.Status == 408, le.Status == 409, le.Status == 429, le.Status >= 500:
		return true
	case le.Status == 0:
		return le.Kind == llm.KindConnection || le.Kind == llm.KindTimeout
	}
	return false
}

// sdkDelay is the SDKs' retryDelay before retry n (n = 0 first).
func sdkDelay(err error, n int) time.Duration {
	var le *llm.Error
	if errors.As(err, &le) && le.RetryAfter > 0 && le.RetryAfter < time.Minute {
		return le.RetryAfter
	}
	d := min(sdkCap, sdkBase<<n)
	return d - time.Duration(rand.Int64N(int64(d/4)))
}

// layer is one layer of a stack of retry layers (a gateway, a service's
// client, an SDK): it makes up to tries attempts of inner, waiting a fully
// jittered base * 2^n between them, and gives up on ctx.
func layer(ctx context.Context, tries int, base time.Duration, inner func(context.Context) error) error {
	var err error
	for n := range tries {
		if err = inner(ctx); err == nil || ctx.Err() != nil {
			return err
		}
		if n < tries-1 {
			if serr := sleep(ctx, time.Duration(rand.Int64N(int64(base<<n)+1))); serr != nil {
				return serr
			}
		}
	}
	return err
}
