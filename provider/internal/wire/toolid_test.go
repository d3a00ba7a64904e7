package wire

import "testing"

func TestToolIDs(t *testing.T) {
	ids := ToolIDs{Valid: func(id string) bool { return IDChars(id, 40) }, Prefix: "call_"}
	for _, tc := range []struct {
		in         string
		translated bool
	}{
		{"toolu_01A09q90qw90lq917835lq9", false},
		{"call_abc", false},
		{"functions.get_weather:0", true},
		{"fc_" + string(make([]byte, 0)) + "0123456789012345678901234567890123456789", true}, // 43 bytes
		{"", true},
	} {
		out := ids.Out(tc.in)
		if (out != tc.in) != tc.translated {
			t.Errorf("Out(%q) = %q, translated %v, want %v", tc.in, out, out != tc.in, tc.translated)
		}
		if !IDChars(out, 40) {
			t.Errorf("Out(%q) = %q, which the provider would refuse", tc.in, out)
		}
		if again := ids.Out(tc.in); again != out {
			t.Errorf("Out(%q) is not stable: %q then %q", tc.in, out, again)
		}
		if back := ids.Back(out); back != tc.in {
			t.Errorf("Back(Out(%q)) = %q", tc.in, back)
		}
	}
	if got := ids.Back("call_fresh"); got != "call_fresh" {
		t.Errorf("Back of a fresh id = %q", got)
	}
	var zero ToolIDs
	if got := zero.Out("a:b"); got != "a:b" {
		t.Errorf("zero ToolIDs translated %q", got)
	}
}
