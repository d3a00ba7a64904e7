package fake_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"
)

// post sends body to base+path with headers (pairs of key and value).
func post(t *testing.T, c *http.Client, url, body string, headers ...string) result {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return do(t, c, req)
}

// esFrame is one decoded AWS event-stream message.
type esFrame struct {
	headers map[string]string
	payload []byte
}

// decodeEventStream decodes AWS event-stream messages, checking both CRCs
// and the lengths; it accepts string header values only.
func decodeEventStream(t *testing.T, b []byte) []esFrame {
	t.Helper()
	var frames []esFrame
	for len(b) > 0 {
		if len(b) < 16 {
			t.Fatalf("event stream: %d trailing bytes", len(b))
		}
		total := int(binary.BigEndian.Uint32(b))
		hlen := int(binary.BigEndian.Uint32(b[4:]))
		if total > len(b) || hlen+16 > total {
			t.Fatalf("event stream: bad lengths total=%d headers=%d have=%d", total, hlen, len(b))
		}
		if got := binary.BigEndian.Uint32(b[8:]); got != crc32.ChecksumIEEE(b[:8]) {
			t.Fatal("event stream: bad prelude CRC")
		}
		if got := binary.BigEndian.Uint32(b[total-4:]); got != crc32.ChecksumIEEE(b[:total-4]) {
			t.Fatal("event stream: bad message CRC")
		}
		f := esFrame{headers: map[string]string{}, payload: b[12+hlen : total-4]}
		h := b[12 : 12+hlen]
		for len(h) > 0 {
			n := int(h[0])
			name := string(h[1 : 1+n])
			h = h[1+n:]
			if h[0] != 7 {
				t.Fatalf("event stream: header %s has type %d, not string", name, h[0])
			}
			vl := int(binary.BigEndian.Uint16(h[1:]))
			f.headers[name] = string(h[3 : 3+vl])
			h = h[3+vl:]
		}
		frames = append(frames, f)
		b = b[total:]
	}
	return frames
}

// readStream reads a response body to its end or its error.
func readStream(t *testing.T, c *http.Client, req *http.Request) (*http.Response, []byte, error) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return resp, b, err
}
