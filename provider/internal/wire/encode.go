package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/backstop-llm/backstop/llm"
)

// Encode marshals the request body v (a struct with json tags) and merges
// extra (llm.Params.Extra) into it as top-level keys, an extra key replacing
// a field of v with the same name. Keys come out sorted when extra is not
// empty. A failure is an *llm.Error of KindBadRequest naming the culprit;
// no request should be sent.
func (e *Endpoint) Encode(v any, extra map[string]any) ([]byte, error) {
	b, err := Marshal(v)
	if err == nil && len(extra) > 0 {
		b, err = merge(b, extra)
	}
	if err != nil {
		return nil, e.Redact(&llm.Error{Provider: e.Provider, Kind: llm.KindBadRequest,
			Message: "cannot encode the request body: " + err.Error(), Err: err})
	}
	return b, nil
}

func merge(b []byte, extra map[string]any) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	for k, v := range extra {
		raw, err := Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("Params.Extra[%q]: %w", k, err)
		}
		m[k] = raw
	}
	return Marshal(m)
}

// Marshal is json.Marshal without HTML escaping: prompts travel as written.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
