// Package capability is the capability check: whether a target can carry
// a request as the walk knows it now. Per target it is a policy, asked
// first in every target's seam.Set (Target): it refuses a target that
// cannot take what the request carries beyond text (tools, images,
// documents, a native schema), one of its media types, or, after a
// context-length failure in the call, its size. Per chain it is Untaken:
// a request carrying a media type that no target takes is refused before
// anything is sent. At Build it checks a target's native schema against
// what its provider takes (Native), and lists the targets that cannot
// carry what an earlier one takes (Warnings).
//
// chain builds a Target for each of its targets (what its provider takes,
// less what the target lacks; its context window from the catalogue) and
// exports the errors as chain.ErrCapability and chain.ErrContextWindow.
package capability

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

var (
	// ErrCapability is the refusal of a target that cannot carry what the
	// request holds: a capability or a media type.
	ErrCapability = errors.New("the target cannot carry what the request holds")
	// ErrContextWindow is the refusal of a target, after a context-length
	// failure, whose context window is not larger than the one that
	// overflowed.
	ErrContextWindow = errors.New("context window not larger than the one that overflowed")
)

// Media is what a request that carries images or documents needs: only
// such a request is checked against the targets' media types.
const Media = llm.CapImages | llm.CapImageURLs | llm.CapDocuments | llm.CapDocumentURLs

// Target is what one target carries, as Build compiled it; a *Target is
// its capability check (a policy.Policy). It holds and learns nothing.
type Target struct {
	// Caps is what its provider takes, less what the target lacks.
	Caps llm.Capabilities
	// Media is the media types its provider takes (zero: any).
	Media llm.MediaTypes
	// ContextWindow is its model's context window in tokens (0: unknown);
	// Model is the model it serves, named when the window is unknown.
	ContextWindow int
	Model         string
}

// Admit refuses the attempt when the target cannot carry the request as
// a describes it: its Needs, its Media (when set), or a context window
// larger than MinWindow (when not negative).
func (t *Target) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	if miss := a.Needs &^ t.Caps; miss != 0 {
		return policy.Admission{Err: fmt.Errorf("%w: %s", ErrCapability, miss), Reason: "cannot carry " + miss.String(), Cause: observe.SkipCapability}
	}
	if a.Media != nil {
		if md := Refused(t.Media, a.Media); md != nil {
			what := describe(md)
			return policy.Admission{Err: fmt.Errorf("%w: %s", ErrCapability, what), Reason: "cannot carry " + what, Cause: observe.SkipCapability}
		}
	}
	if a.MinWindow >= 0 && t.ContextWindow <= a.MinWindow {
		reason := fmt.Sprintf("context window %d not larger than %d", t.ContextWindow, a.MinWindow)
		if t.ContextWindow == 0 {
			reason = fmt.Sprintf("context window unknown: the catalogue does not know model %q; set the target's ContextWindow, or add the model with Builder.Catalog", t.Model)
		}
		return policy.Admission{Err: fmt.Errorf("%w: %s", ErrContextWindow, reason), Reason: reason, Cause: observe.SkipContextWindow}
	}
	return policy.Admission{}
}

// Settle does nothing: the check holds nothing.
func (*Target) Settle(context.Context, *policy.Attempt, policy.Hold, *policy.Outcome) {}

// Untaken returns the bad request of a call whose request carries a media
// type that none of targets takes (llm.MediaProvider): no target could be
// sent it, so the call fails before anything is sent, as a request every
// provider would refuse does. Its message names the media type, where it
// is, and the types the targets take.
func Untaken(req *llm.Request, targets []*Target) error {
	for i := range req.Messages {
		m := &req.Messages[i]
		for j := range m.Parts {
			md := m.Parts[j].Media
			if md == nil || takenBySome(targets, md) {
				continue
			}
			return &llm.Error{Provider: "backstop", Kind: llm.KindBadRequest, Message: fmt.Sprintf(
				"message %d (%s), part %d: no target takes %s (they take %s); convert it to one of those, or add a target whose provider takes it",
				i, m.Role, j, describe(md), takenTypes(targets, md.IsDocument()))}
		}
	}
	return nil
}

// takenBySome reports whether one of targets takes md's media type.
func takenBySome(targets []*Target, md *llm.Media) bool {
	for _, t := range targets {
		if Takes(t.Media, md) {
			return true
		}
	}
	return false
}

// takenTypes lists the media types of the kind (documents, or images) that
// targets take, each once, in their order.
func takenTypes(targets []*Target, documents bool) string {
	var all []string
	for _, t := range targets {
		list := t.Media.Images
		if documents {
			list = t.Media.Documents
		}
		for _, mt := range list {
			if !slices.Contains(all, mt) {
				all = append(all, mt)
			}
		}
	}
	return strings.Join(all, ", ")
}

// describe names md's kind and media type, for a reason or an error:
// `document media type "application/zip"`.
func describe(md *llm.Media) string {
	if md.IsDocument() {
		return fmt.Sprintf("document media type %q", md.MediaType)
	}
	return fmt.Sprintf("image media type %q", md.MediaType)
}

// Catalogue completes a target that serves model from cat (catalog.Default
// when nil): its window when 0, its price when zero (the model's price on,
// catalog.Model.PriceFor's name of where the target is served), and its lacks with
// what the model lacks, less what the target takes. It returns the model's
// entry; a model cat does not know leaves all three, and returns a zero
// Model.
func Catalogue(cat *catalog.Catalog, model, on string, takes llm.Capabilities, window *int, price *catalog.Price, lacks *llm.Capabilities) catalog.Model {
	if cat == nil {
		cat = catalog.Default()
	}
	m, ok := cat.Lookup(model)
	if !ok {
		return catalog.Model{}
	}
	if *window == 0 {
		*window = m.ContextWindow
	}
	if *price == (catalog.Price{}) {
		*price = m.PriceFor(on)
	}
	*lacks |= m.Lacks &^ takes
	return m
}

// Carried is what a target on provider p carries: p's capabilities less
// lacks, and the media types p takes; everything, and any media, for a nil
// p (reported already).
func Carried(p llm.Provider, lacks llm.Capabilities) (caps llm.Capabilities, media llm.MediaTypes) {
	if p == nil {
		return llm.CapAll, media
	}
	return Of(p) &^ lacks, MediaOf(p)
}

// Native returns the schema a target sends as Request.ResponseSchema (nil
// when on is false: the target has no NativeSchema): its own Schema, or
// else the chain's, once it has checked that the target's provider p,
// taking caps, can enforce it. When it cannot, it returns the problem to
// report and its cause (nil when the problem says it all); a nil p is
// reported already and returns nothing.
func Native(on bool, own, chain []byte, p llm.Provider, caps llm.Capabilities) (native []byte, problem string, err error) {
	if !on {
		return nil, "", nil
	}
	schema := own
	if schema == nil {
		schema = chain
	}
	switch {
	case schema == nil:
		return nil, "NativeSchema is set but neither the target nor the chain has a Schema; set one, or unset NativeSchema", nil
	case p == nil:
		return nil, "", nil // reported already
	case caps&llm.CapNativeSchema == 0:
		return nil, fmt.Sprintf("NativeSchema is set but provider %q cannot enforce a schema natively (its capabilities: %s); unset NativeSchema, the chain validates the answer all the same", p.Name(), caps), nil
	}
	if sc, ok := p.(llm.SchemaChecker); ok {
		if err := sc.CheckResponseSchema(schema); err != nil {
			return nil, "NativeSchema is set but the provider cannot take the Schema natively; change the schema as the error says, or unset NativeSchema", err
		}
	}
	return schema, "", nil
}

// Named is a model target as Warnings reads it: its name, its tier's, and
// what it carries.
type Named struct {
	Name, Tier string
	Caps       llm.Capabilities
}

// Warnings lists the targets, in the chain's order, that cannot carry
// what an earlier target takes: a request that needs it skips them, so
// the chain is shorter for it than it looks.
func Warnings(targets []Named) []string {
	var out []string
	var before llm.Capabilities // what the earlier targets take, together
	var first [8]string         // the first target that takes each capability
	for _, t := range targets {
		if miss := before &^ t.Caps; miss != 0 {
			for i := range len(first) {
				if bit := llm.Capabilities(1 << i); miss&bit != 0 {
					out = append(out, fmt.Sprintf("target %q (%s) cannot carry %s, which %q takes: a request that carries them skips it",
						t.Name, t.Tier, bit, first[i]))
				}
			}
		}
		for i := range len(first) {
			if bit := llm.Capabilities(1 << i); t.Caps&bit != 0 && first[i] == "" {
				first[i] = t.Name
			}
		}
		before |= t.Caps
	}
	return out
}
