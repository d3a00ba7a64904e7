package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/redistest"
)

// luaNumber reports whether Lua's tonumber may read v as a number, and the
// numbers it may be read as. It is generous (it accepts what any of Go's
// parsers accepts, in every base they guess), so that the fuzz test only
// fails on a remote.Published that no reading of the stored value explains.
func luaNumber(v string) []float64 {
	s := strings.Trim(v, " \t\n\r\f\v")
	var out []float64
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		out = append(out, f)
	}
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		out = append(out, float64(i))
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		out = append(out, float64(i))
	}
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		if i, err := strconv.ParseInt(s[2:], 16, 64); err == nil {
			out = append(out, float64(i))
		}
	}
	return out
}

// FuzzBreakersLoad writes arbitrary fields and values into the shared key
// and checks that Load returns only what a well-formed, numeric, future
// field explains, once per name, with positive durations, and everything
// a plainly well-formed one says.
func FuzzBreakersLoad(f *testing.F) {
	m := miniredis.RunT(f)
	m.SetTime(t0)
	now := t0.UnixMilli()
	c, _ := redistest.CountedClient(f, m.Addr())
	s := newTestShared(f, c, sharedKey, breaker.SharedConfig{Timeout: time.Minute})
	future := strconv.FormatInt(now+60_000, 10)
	for _, seed := range [][4]string{
		{"o:a", future, "g:a", future},
		{"o:a", future, "g:b", strconv.FormatInt(now+1, 10)},
		{"g:a", strconv.FormatInt(now-1, 10), "o:a", strconv.FormatInt(now, 10)},
		{"x", future, "o:", future},
		{"o:a:b", " " + future + " ", "g:é", "0x1A3185C5C00"},
		{"o:bad", "soon", "g:bad", ""},
		{"o:f", future + ".75", "g:f", "1e13"},
		{"o:a", future, "o:a", "1"},
	} {
		f.Add(seed[0], seed[1], seed[2], seed[3])
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, f1, v1, f2, v2 string) {
		m.Del(sharedKey)
		m.HSet(sharedKey, f1, v1)
		m.HSet(sharedKey, f2, v2)
		written := map[string]string{f1: v1, f2: v2} // f2 overwrites f1 if they are equal

		rs, err := s.Load(ctx)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		// explained reports whether field's stored value may be a number
		// after now.
		explained := func(field string) bool {
			v, ok := written[field]
			if !ok {
				return false
			}
			for _, n := range luaNumber(v) {
				if n > float64(now) {
					return true
				}
			}
			return false
		}
		seen := map[string]bool{}
		for _, r := range rs {
			if r.Name == "" {
				t.Fatalf("Load returned %+v: an empty name", r)
			}
			if seen[r.Name] {
				t.Fatalf("Load returned %q twice: %+v", r.Name, rs)
			}
			seen[r.Name] = true
			if r.Open < 0 || r.Gate < 0 || r.Open == 0 && r.Gate == 0 {
				t.Fatalf("Load returned %+v: want positive Open or Gate, neither negative", r)
			}
			if r.Open > 0 && !explained("o:"+r.Name) {
				t.Fatalf("Load returned %+v: no numeric future field %q was written (%q)", r, "o:"+r.Name, written)
			}
			if r.Gate > 0 && !explained("g:"+r.Name) {
				t.Fatalf("Load returned %+v: no numeric future field %q was written (%q)", r, "g:"+r.Name, written)
			}
		}
		// A field the scripts could have written (a kind, a name, a value
		// of plain digits up to a year ahead) is read exactly.
		for field, v := range written {
			if len(field) < 3 || field[1] != ':' || field[0] != 'o' && field[0] != 'g' {
				continue
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || strings.ContainsAny(v, "+- ") || n <= now || n > now+365*24*3600*1000 {
				continue
			}
			want := time.Duration(n-now) * time.Millisecond
			var got time.Duration
			for _, r := range rs {
				if r.Name == field[2:] {
					if field[0] == 'o' {
						got = r.Open
					} else {
						got = r.Gate
					}
				}
			}
			if got != want {
				t.Fatalf("field %q = %q: Load returned %v for it (%+v); want %v", field, v, got, rs, want)
			}
		}
	})
}
