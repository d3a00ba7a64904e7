package llm

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// every is a provider with every optional interface, each method answering
// something of its own, so that a forwarded call can be told apart.
type every struct{}

func (every) Name() string { return "every" }

func (every) Complete(context.Context, Request) (*Response, error) {
	return &Response{Text: "complete"}, nil
}

func (every) Stream(context.Context, Request) (Stream, error) { return nil, errors.New("stream") }

func (every) Capabilities() Capabilities { return CapTools }

func (every) MediaTypes() MediaTypes { return MediaTypes{Images: []string{"image/png"}} }

func (every) CheckResponseSchema([]byte) error { return errors.New("schema") }

func (every) Deployment() Deployment { return Deployment{Platform: "bedrock", Region: "eu-west-1"} }

func (every) ModelDeployment(model string) (Deployment, error) {
	return Deployment{Platform: "bedrock", Region: model}, nil
}

// TestWrapForwardsExactly builds a wrapped provider for every set of
// optional interfaces and checks that it has each interface of the set,
// forwarded to the provider it wraps, and none other: a provider that
// cannot stream must not appear to stream once wrapped.
func TestWrapForwardsExactly(t *testing.T) {
	sets := 0
	for has := range uint8(1 << 6) {
		if has&hasDeployment != 0 && has&hasModelDeployment != 0 {
			continue // hasModelDeployment includes Deployment
		}
		sets++
		var p every
		w := &wrapped{p: p, complete: p.Complete, stream: p.Stream}
		got := w.as(has)
		ctx := context.Background()

		if r, err := got.Complete(ctx, Request{}); err != nil || r.Text != "complete" || got.Name() != "every" {
			t.Errorf("set %06b: Name %q, Complete %v %v", has, got.Name(), r, err)
		}
		sp, ok := got.(StreamProvider)
		if want := has&hasStream != 0; ok != want {
			t.Errorf("set %06b: StreamProvider %v, want %v", has, ok, want)
		} else if ok {
			if _, err := sp.Stream(ctx, Request{}); err == nil || err.Error() != "stream" {
				t.Errorf("set %06b: Stream not forwarded: %v", has, err)
			}
		}
		cp, ok := got.(CapableProvider)
		if want := has&hasCaps != 0; ok != want {
			t.Errorf("set %06b: CapableProvider %v, want %v", has, ok, want)
		} else if ok && cp.Capabilities() != CapTools {
			t.Errorf("set %06b: Capabilities %v, want tools", has, cp.Capabilities())
		}
		mp, ok := got.(MediaProvider)
		if want := has&hasMedia != 0; ok != want {
			t.Errorf("set %06b: MediaProvider %v, want %v", has, ok, want)
		} else if ok && (len(mp.MediaTypes().Images) != 1 || mp.MediaTypes().Images[0] != "image/png") {
			t.Errorf("set %06b: MediaTypes %v", has, mp.MediaTypes())
		}
		sc, ok := got.(SchemaChecker)
		if want := has&hasSchema != 0; ok != want {
			t.Errorf("set %06b: SchemaChecker %v, want %v", has, ok, want)
		} else if ok {
			if err := sc.CheckResponseSchema(nil); err == nil || err.Error() != "schema" {
				t.Errorf("set %06b: CheckResponseSchema not forwarded: %v", has, err)
			}
		}
		dp, ok := got.(DeployedProvider)
		if want := has&(hasDeployment|hasModelDeployment) != 0; ok != want {
			t.Errorf("set %06b: DeployedProvider %v, want %v", has, ok, want)
		} else if ok && dp.Deployment().Region != "eu-west-1" {
			t.Errorf("set %06b: Deployment %v", has, dp.Deployment())
		}
		mdp, ok := got.(ModelDeployedProvider)
		if want := has&hasModelDeployment != 0; ok != want {
			t.Errorf("set %06b: ModelDeployedProvider %v, want %v", has, ok, want)
		} else if ok {
			if d, err := mdp.ModelDeployment("us-east-1"); err != nil || d.Region != "us-east-1" {
				t.Errorf("set %06b: ModelDeployment %v %v", has, d, err)
			}
		}
	}
	if sets != 48 {
		t.Fatalf("checked %d sets, want 48", sets)
	}
}

// bare, streaming and regional are providers with a few of the optional
// interfaces each, for Wrap to find.
type (
	bare      struct{}
	streaming struct{ bare }
	regional  struct{ bare }
)

func (bare) Name() string                                         { return "bare" }
func (bare) Complete(context.Context, Request) (*Response, error) { return &Response{}, nil }
func (streaming) Stream(context.Context, Request) (Stream, error) { return nil, nil }
func (regional) Deployment() Deployment                           { return Deployment{Platform: "vertex"} }
func (regional) Capabilities() Capabilities                       { return 0 }

// TestWrapFindsWhatTheProviderHas: Wrap gives the result the interfaces of
// the provider it wraps, also when that provider is itself wrapped.
func TestWrapFindsWhatTheProviderHas(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Provider
		want uint8
	}{
		{"bare", bare{}, 0},
		{"streaming", streaming{}, hasStream},
		{"regional", regional{}, hasDeployment | hasCaps},
		{"every", every{}, hasStream | hasCaps | hasMedia | hasSchema | hasModelDeployment},
		{"wrapped twice", Wrap(Wrap(every{}, Middleware{}), Middleware{}), hasStream | hasCaps | hasMedia | hasSchema | hasModelDeployment},
		{"wrapped streaming", Wrap(streaming{}, Middleware{}), hasStream},
	} {
		got := Wrap(tc.p, Middleware{})
		var has uint8
		if _, ok := got.(StreamProvider); ok {
			has |= hasStream
		}
		if _, ok := got.(CapableProvider); ok {
			has |= hasCaps
		}
		if _, ok := got.(MediaProvider); ok {
			has |= hasMedia
		}
		if _, ok := got.(SchemaChecker); ok {
			has |= hasSchema
		}
		if _, ok := got.(ModelDeployedProvider); ok {
			has |= hasModelDeployment
		} else if _, ok := got.(DeployedProvider); ok {
			has |= hasDeployment
		}
		if has != tc.want {
			t.Errorf("%s: wrapped has %06b, want %06b", tc.name, has, tc.want)
		}
	}
}

func TestWrapOfNilIsNil(t *testing.T) {
	if p := Wrap(nil, Middleware{}); p != nil {
		t.Fatalf("Wrap(nil) = %v, want nil", p)
	}
}

// TestWrapHookReturningNilPanicsNamingIt: a hook that returns no call is a
// mistake made once, at Wrap, not a nil func called on the first attempt.
func TestWrapHookReturningNilPanicsNamingIt(t *testing.T) {
	for _, tc := range []struct {
		hook string
		m    Middleware
	}{
		{"Middleware.Complete", Middleware{Complete: func(CompleteFunc) CompleteFunc { return nil }}},
		{"Middleware.Stream", Middleware{Stream: func(StreamFunc) StreamFunc { return nil }}},
	} {
		func() {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tc.hook) || !strings.Contains(msg, "return next") {
					t.Errorf("%s returning nil: recovered %v, want a panic naming it", tc.hook, r)
				}
			}()
			Wrap(streaming{}, tc.m)
		}()
	}
}
