package openaisdk

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
)

// schemaName is the name every response format is sent with.
const schemaName = "response"

// rawArguments returns a call's arguments as the SDK decoded them, or the
// raw JSON when a compatible server sent an object instead of a string.
func rawArguments(decoded, raw string) string {
	if decoded == "" {
		if r := bytes.TrimSpace([]byte(raw)); len(r) > 0 && r[0] == '{' {
			return string(r)
		}
	}
	return decoded
}

// dataURL returns data as a data: URL of mediaType, base64-encoded.
func dataURL(mediaType string, data []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// jsonObject decodes an object schema into the map the SDK's params take,
// each value kept as the JSON text it was (numbers, key order within
// values and all).
func jsonObject(b json.RawMessage) (map[string]any, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out, nil
}
