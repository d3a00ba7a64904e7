package validate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type line struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

type order struct {
	ID    string `json:"id"`
	Lines []line `json:"lines"`
}

// orderLoose allows what order cannot hold: a quantity as a string, an id
// as large as any integer.
const orderLoose = `{
	"type": "object",
	"required": ["id", "lines"],
	"properties": {
		"id": {"type": "string"},
		"lines": {"type": "array", "items": {
			"type": "object",
			"required": ["sku", "qty"],
			"properties": {
				"sku": {"type": "string"},
				"qty": {"type": ["integer", "string"]},
				"price": {"type": "number"}
			}
		}}
	}
}`

func TestDecode(t *testing.T) {
	s := mustCompile(t, orderLoose)
	got, raw, err := Decode[order](s, "Done:\n```json\n"+`{"id": "A1", "lines": [{"sku": "x", "qty": 2, "price": 9.5}]}`+"\n```")
	if err != nil {
		t.Fatal(err)
	}
	want := order{ID: "A1", Lines: []line{{SKU: "x", Qty: 2, Price: 9.5}}}
	if got.ID != want.ID || len(got.Lines) != 1 || got.Lines[0] != want.Lines[0] {
		t.Fatalf("Decode = %+v; want %+v", got, want)
	}
	if !json.Valid(raw) || !strings.HasPrefix(string(raw), `{"id": "A1"`) {
		t.Fatalf("Decode returned JSON %q", raw)
	}

	t.Run("into a pointer and a map", func(t *testing.T) {
		p, _, err := Decode[*order](s, `{"id": "A2", "lines": []}`)
		if err != nil || p == nil || p.ID != "A2" {
			t.Fatalf("Decode[*order] = %+v, %v", p, err)
		}
		m, _, err := Decode[map[string]any](s, `{"id": "A3", "lines": []}`)
		if err != nil || m["id"] != "A3" {
			t.Fatalf("Decode[map] = %v, %v", m, err)
		}
	})
}

func TestDecodeTypeMismatch(t *testing.T) {
	s := mustCompile(t, orderLoose)
	answer := `{"id": "A1", "lines": [{"sku": "x", "qty": "two"}]}`
	got, raw, err := Decode[order](s, answer)
	if !errors.Is(err, ErrTypeMismatch) {
		t.Fatalf("Decode of a valid answer T cannot hold: %v; want ErrTypeMismatch", err)
	}
	if errors.Is(err, ErrInvalid) {
		t.Fatalf("a type mismatch matches ErrInvalid: %v; the answer passed the schema", err)
	}
	var derr *DecodeError
	if !errors.As(err, &derr) || derr.Type.String() != "validate.order" {
		t.Fatalf("error %v is not a *DecodeError naming validate.order", err)
	}
	var uerr *json.UnmarshalTypeError
	if !errors.As(err, &uerr) {
		t.Fatalf("error %v does not reach json's *UnmarshalTypeError", err)
	}
	for _, want := range []string{"validate.order", "passed the schema", "schema and the Go type disagree", "qty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got.ID != "" || got.Lines != nil {
		t.Errorf("Decode returned a half-filled %+v; want the zero order", got)
	}
	if string(raw) != answer {
		t.Errorf("Decode returned JSON %q; want the validated answer", raw)
	}
	if Feedback(err) != "" {
		t.Errorf("Feedback of a type mismatch is %q; want none (re-asking the model cannot fix it)", Feedback(err))
	}
}

func TestDecodeInvalid(t *testing.T) {
	s := mustCompile(t, orderLoose)
	for _, answer := range []string{`no JSON here`, `{"id": "A1"}`, `{"id": 1, "lines": []}`} {
		got, raw, err := Decode[order](s, answer)
		if !errors.Is(err, ErrInvalid) || errors.Is(err, ErrTypeMismatch) || raw != nil || got.ID != "" {
			t.Errorf("Decode(%q) = %+v, %q, %v; want ErrInvalid", answer, got, raw, err)
		}
	}
}
