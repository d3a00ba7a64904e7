package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// FuzzExchangeStreamLimit fuzzes the two limits the Exchange reads a
// streamed body through, over bodies delivered in reads of fuzzed sizes:
// the SSE framing (no line and no event longer than the cap) and the AWS
// event stream's frames (none announced longer than the cap). Whatever
// the body, what passes through is a prefix of it; when the whole body
// passes, it holds nothing over the cap; when it is cut, the Exchange's
// Failure says so, and no more than the body was read.
func FuzzExchangeStreamLimit(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: b\r\n\r\n"), uint8(3), false)
	f.Add([]byte("data: "+strings.Repeat("x", 40)+"\n\n"), uint8(7), false)
	f.Add([]byte("data: a\ndata: b\ndata: c\r\rdata: d\r\n"), uint8(1), false)
	var frame bytes.Buffer
	binary.Write(&frame, binary.BigEndian, uint32(16))
	frame.Write(make([]byte, 12))
	f.Add(frame.Bytes(), uint8(5), true)
	f.Add([]byte{0, 0, 1, 0, 1, 2, 3}, uint8(2), true)
	f.Fuzz(func(t *testing.T, body []byte, size uint8, frames bool) {
		const max = 32
		ep := &Endpoint{Provider: "p", MaxBytes: max}
		x := ep.NewExchange(true, false)
		ct := "text/event-stream"
		if frames {
			ct = "application/vnd.amazon.eventstream"
		}
		var r io.Reader = bytes.NewReader(body)
		if size%4 == 0 {
			r = iotest.OneByteReader(r)
		} else {
			r = iotest.HalfReader(r)
		}
		res, err := x.Middleware(mustRequest(t), func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(r), ContentLength: -1}, nil
		})
		if err != nil {
			t.Fatalf("Middleware: %v", err)
		}
		got, rerr := io.ReadAll(res.Body)
		if !bytes.HasPrefix(body, got) {
			t.Fatalf("read %q, not a prefix of the body", got)
		}
		if rerr == nil {
			if !bytes.Equal(got, body) {
				t.Fatalf("a clean end after %d of %d bytes", len(got), len(body))
			}
			if !frames && longestSSE(body) > max {
				t.Fatalf("passed a line or event of %d bytes, over the cap %d: %q", longestSSE(body), max, body)
			}
			if x.Failure() != nil {
				t.Fatalf("failure %v with the whole body read", x.Failure())
			}
			return
		}
		if !errors.Is(rerr, ErrRefused) || x.Failure() == nil {
			t.Fatalf("read error %v, failure %v; want ErrRefused and a failure", rerr, x.Failure())
		}
	})
}

func mustRequest(t *testing.T) *http.Request {
	req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1/x", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// longestSSE returns the length of the longest line, or the longest run
// of lines between blank lines, in body: what the SSE limit judges.
func longestSSE(body []byte) int {
	s := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	longest, event := 0, 0
	for _, line := range strings.Split(s, "\n") {
		if line == "" {
			event = 0
			continue
		}
		event += len(line)
		longest = max(longest, len(line), event)
	}
	return longest
}
