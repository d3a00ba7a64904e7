package chain

// The capability check as a policy of each target: whether the target
// can carry the request as the walk knows it now.

import (
	"context"
	"fmt"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// fit refuses a target that cannot carry the request: what the request
// needs beyond text (tools, images, documents, a native schema), its
// media types, and a context window larger than one that overflowed in
// this call. It holds and learns nothing.
type fit struct{ t *target }

func (f fit) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	t := f.t
	if miss := a.Needs &^ t.caps; miss != 0 {
		return policy.Admission{Err: fmt.Errorf("%w: %s", ErrCapability, miss), Reason: "cannot carry " + miss.String(), Cause: observe.SkipCapability}
	}
	if a.Media != nil {
		if md := t.media.Refused(a.Media); md != nil {
			what := describeMedia(md)
			return policy.Admission{Err: fmt.Errorf("%w: %s", ErrCapability, what), Reason: "cannot carry " + what, Cause: observe.SkipCapability}
		}
	}
	if a.MinWindow >= 0 && t.ContextWindow <= a.MinWindow {
		reason := fmt.Sprintf("context window %d not larger than %d", t.ContextWindow, a.MinWindow)
		if t.ContextWindow == 0 {
			reason = fmt.Sprintf("context window unknown: the catalogue does not know model %q; set the target's ContextWindow, or add the model with Builder.Catalog", servedModel(&t.Target))
		}
		return policy.Admission{Err: fmt.Errorf("%w: %s", ErrContextWindow, reason), Reason: reason, Cause: observe.SkipContextWindow}
	}
	return policy.Admission{}
}

func (fit) Settle(context.Context, *policy.Attempt, policy.Hold, *policy.Outcome) {}

// fits reports whether t can take the request as the walk knows it now
// (fit's check, without building a refusal).
func (w *walk) fits(t *target) bool {
	return w.needs&^t.caps == 0 && (w.media == nil || t.media.Refused(w.media) == nil) &&
		(w.minWindow < 0 || t.ContextWindow > w.minWindow)
}

var _ llm.Capabilities // fit reads the target's
