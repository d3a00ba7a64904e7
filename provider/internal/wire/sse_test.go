package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll reads every event of r until an error and returns the events as
// "type|data" strings and the error.
func readAll(r io.Reader, limit int) ([]string, error) {
	s := NewSSE(r, limit)
	var out []string
	for {
		ev, err := s.Next()
		if err != nil {
			return out, err
		}
		out = append(out, ev.Type+"|"+string(ev.Data))
	}
}

func TestSSE(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"LF", "event: a\ndata: 1\n\ndata: 2\n\n", []string{"a|1", "|2"}},
		{"CRLF", "event: a\r\ndata: 1\r\n\r\ndata: 2\r\n\r\n", []string{"a|1", "|2"}},
		{"CR", "event: a\rdata: 1\r\rdata: 2\r\r", []string{"a|1", "|2"}},
		{"mixed", "data: 1\r\n\ndata: 2\r\r\ndata: 3\n\r", []string{"|1", "|2", "|3"}},
		{"multi-line data", "data: {\"a\":\ndata:  1}\ndata\n\n", []string{"|{\"a\":\n 1}\n"}},
		{"no space", "event:x\ndata:y\n\n", []string{"x|y"}},
		{"only one space dropped", "data:  y \n\n", []string{"| y "}},
		{"comments and other fields", ": ping\nid: 7\nretry: 100\nfoo: bar\ndata: x\n:\n\n", []string{"|x"}},
		{"empty data dispatches", "data:\n\ndata\n\n", []string{"|", "|"}},
		{"no data does not dispatch", "event: a\n\n\n\ndata: x\n\n", []string{"|x"}},
		{"type resets after dispatch", "event: a\ndata: 1\n\ndata: 2\n\n", []string{"a|1", "|2"}},
		{"last event type wins", "event: a\nevent: b\ndata: 1\n\n", []string{"b|1"}},
		{"unfinished event discarded", "data: 1\n\ndata: 2\n", []string{"|1"}},
		{"unterminated line discarded", "data: 1\n\ndata: 2", []string{"|1"}},
		{"BOM", "\xef\xbb\xbfdata: 1\n\n", []string{"|1"}},
		{"BOM only once", "\xef\xbb\xbfdata: 1\n\n\xef\xbb\xbfdata: 2\n\n", []string{"|1"}},
		{"field names are case-sensitive", "Data: 1\nDATA: 2\n\n", nil},
		{"empty", "", nil},
	}
	readers := map[string]func(string) io.Reader{
		"whole":    func(s string) io.Reader { return strings.NewReader(s) },
		"one byte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":     func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
		"data+EOF": func(s string) io.Reader { return iotest.DataErrReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			got, err := readAll(mk(tt.in), 1000)
			if err != io.EOF || fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("%s (%s reader): got %q, %v; want %q, EOF", tt.name, rname, got, err, tt.want)
			}
		}
	}
}

// TestSSEIncremental checks that Next returns an event as soon as its blank
// line is in, without reading further, and that errors are sticky.
func TestSSEIncremental(t *testing.T) {
	boom := errors.New("boom")
	s := NewSSE(io.MultiReader(strings.NewReader("data: 1\r\n\r\n"), iotest.ErrReader(boom)), 100)
	ev, err := s.Next()
	if err != nil || string(ev.Data) != "1" {
		t.Fatalf("first event %q, %v", ev.Data, err)
	}
	for range 2 {
		if _, err := s.Next(); err != boom {
			t.Fatalf("after the event: %v; want boom", err)
		}
	}
	// A CR at the end of one read and the LF at the start of the next make
	// one line end, even when the LF arrives after the event was returned.
	r, w := io.Pipe()
	s = NewSSE(r, 100)
	go func() {
		io.WriteString(w, "data: 1\r\r")
		io.WriteString(w, "\ndata: 2\r\n\r\n")
		w.Close()
	}()
	got := []string{}
	for {
		ev, err := s.Next()
		if err != nil {
			break
		}
		got = append(got, string(ev.Data))
	}
	if fmt.Sprint(got) != "[1 2]" {
		t.Errorf("got %q; want [1 2]", got)
	}
}

// endless is a server that never ends its line.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

func TestSSELimits(t *testing.T) {
	const limit = 64 << 10
	// A line that never ends fails soon after the limit, in bounded memory.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	src := &endless{}
	_, err := readAll(io.MultiReader(strings.NewReader("data: "), src), limit)
	runtime.ReadMemStats(&after)
	if err != ErrLineTooLong {
		t.Fatalf("endless line: %v; want ErrLineTooLong", err)
	}
	if src.n > limit+sseBuf {
		t.Errorf("read %d bytes of an endless line; want at most %d", src.n, limit+sseBuf)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*limit {
		t.Errorf("allocated %d bytes for a limit of %d", alloc, limit)
	}
	// At the limit is fine; one more byte is not.
	ok := "data:" + strings.Repeat("x", 95) + "\n\n"
	if got, err := readAll(strings.NewReader(ok), 100); err != io.EOF || len(got) != 1 {
		t.Errorf("line of exactly the limit: %d events, %v", len(got), err)
	}
	if _, err := readAll(iotest.OneByteReader(strings.NewReader("data:"+strings.Repeat("x", 96)+"\n\n")), 100); err != ErrLineTooLong {
		t.Errorf("line one byte over: %v", err)
	}
	// An event may not grow past the limit through many short lines.
	many := strings.Repeat("data: 0123456789\n", 20) + "\n"
	if _, err := readAll(strings.NewReader(many), 100); err != ErrEventTooLarge {
		t.Errorf("many data lines: %v; want ErrEventTooLarge", err)
	}
	if got, err := readAll(strings.NewReader(many), 220); err != io.EOF || len(got) != 1 || len(got[0]) != 1+20*11-1 {
		t.Errorf("many data lines under the limit: %q, %v", got, err)
	}
}

func TestSSEEmptyReads(t *testing.T) {
	if _, err := readAll(emptyReader{}, 100); err != io.ErrNoProgress {
		t.Errorf("a reader that returns nothing: %v; want io.ErrNoProgress", err)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

// refSSE is a reference parser, written straight from the standard over the
// whole input: split into lines on CRLF, LF or CR, drop the unterminated
// last line, then interpret. It reports whether a line or an event went
// over limit, and the events before that.
func refSSE(in []byte, limit int) (events []string, over bool) {
	var lines [][]byte
	for {
		i := bytes.IndexAny(in, "\r\n")
		if i < 0 {
			// The unterminated tail is discarded, but only once read:
			// too long, it is an error after the events before it.
			lines = append(lines, nil)
			over = len(in) > limit
			break
		}
		lines = append(lines, in[:i])
		if in[i] == '\r' && i+1 < len(in) && in[i+1] == '\n' {
			i++
		}
		in = in[i+1:]
	}
	lines, tail := lines[:len(lines)-1], over
	var typ string
	var data []byte
	hasData := false
	for n, l := range lines {
		if len(l) > limit { // the BOM counts towards the limit
			return events, true
		}
		if n == 0 {
			l = bytes.TrimPrefix(l, []byte("\xef\xbb\xbf"))
		}
		switch {
		case len(l) == 0:
			if hasData {
				events = append(events, typ+"|"+string(data))
			}
			typ, data, hasData = "", nil, false
		case l[0] == ':':
		default:
			name, value, _ := bytes.Cut(l, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(name) {
			case "event":
				typ = string(value)
			case "data":
				if hasData {
					data = append(data, '\n')
				}
				data = append(data, value...)
				hasData = true
				if len(data) > limit {
					return events, true
				}
			}
		}
	}
	return events, tail
}

// chunked is a reader returning its input in pieces of the given sizes,
// cycling through them.
type chunked struct {
	b     []byte
	sizes []byte
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.b) == 0 {
		return 0, io.EOF
	}
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])%17 + 1
		c.i++
	}
	n = min(n, len(p), len(c.b))
	copy(p, c.b[:n])
	c.b = c.b[n:]
	return n, nil
}

func FuzzSSE(f *testing.F) {
	for _, s := range []string{
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
		"data: a\r\ndata: b\r\n\r\n: comment\r\n\r\n",
		"data: 1\rdata: 2\r\r\n\n",
		"\xef\xbb\xbfevent:x\ndata\nid: 1\nretry: 9\n\n",
		"data: " + strings.Repeat("x", 40) + "\n\n",
		"data: [DONE]",
	} {
		f.Add([]byte(s), []byte{3, 1, 7}, uint8(32))
	}
	f.Fuzz(func(t *testing.T, in, sizes []byte, lim uint8) {
		limit := int(lim) + 1
		want, over := refSSE(in, limit)
		s := NewSSE(&chunked{b: in, sizes: sizes}, limit)
		var got []string
		var err error
		for {
			var ev Event
			if ev, err = s.Next(); err != nil {
				break
			}
			if len(ev.Data) > limit || len(ev.Type) > limit {
				t.Fatalf("event %q %q is over the limit %d", ev.Type, ev.Data, limit)
			}
			got = append(got, ev.Type+"|"+string(ev.Data))
			// Bounded memory: the buffers never outgrow the limit (plus
			// one read and append's rounding up).
			if bound := 2 * (limit + sseBuf); cap(s.line) > bound || cap(s.data) > bound || cap(s.typ) > bound {
				t.Fatalf("buffers grew to %d, %d, %d bytes for a limit of %d", cap(s.line), cap(s.data), cap(s.typ), limit)
			}
		}
		switch {
		case over && err != ErrLineTooLong && err != ErrEventTooLarge:
			t.Fatalf("over the limit %d but err %v", limit, err)
		case !over && err != io.EOF:
			t.Fatalf("err %v; want io.EOF", err)
		}
		if _, again := s.Next(); again != err {
			t.Fatalf("error not sticky: %v then %v", err, again)
		}
		if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Fatalf("events %q; want %q", got, want)
		}
	})
}
