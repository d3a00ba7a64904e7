package anthropic

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// bodyTransport answers every request with a 200 event stream whose body is
// body, delivered in reads of the sizes given (cycling; 1 to 64 bytes).
// A fuzz worker runs one input at a time, so one transport serves them all.
type bodyTransport struct {
	body  []byte
	sizes []byte
}

func (b *bodyTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: 200, ContentLength: -1,
		Header: http.Header{"Content-Type": {"text/event-stream"}, "Request-Id": {"req_1"}},
		Body:   io.NopCloser(&pieces{b: b.body, sizes: b.sizes})}, nil
}

// pieces reads b in pieces of the sizes given, cycling (each 1 to 64
// bytes); no sizes means all at once.
type pieces struct {
	b     []byte
	sizes []byte
	i     int
}

func (p *pieces) Read(buf []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := len(p.b)
	if len(p.sizes) > 0 {
		n = int(p.sizes[p.i%len(p.sizes)])%64 + 1
		p.i++
	}
	n = copy(buf, p.b[:min(n, len(p.b))])
	p.b = p.b[n:]
	return n, nil
}

func FuzzStream(f *testing.F) {
	// Short seeds: the fuzzer minimizes every new input, in time that
	// grows with the square of its length.
	seeds := []string{
		"event: message_start\ndata: {\"message\":{\"id\":\"m\",\"model\":\"c\",\"usage\":{\"input_tokens\":1,\"cache_read_input_tokens\":2}}}\n\n",
		"event: content_block_start\ndata: {\"content_block\":{\"type\":\"text\",\"text\":\"a\"}}\n\n",
		"event: content_block_delta\ndata: {\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\r\n\r\n",
		"event: message_delta\ndata: {\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n",
		"event: message_stop\ndata: {}\n\n",
		"data: {\"type\":\"message_stop\"}\r\r",
		"event: error\ndata: {\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
		"event: ping\n: hi\ndata: {\ndata: }\n\n",
		"event: message_delta\ndata: {\"delta\":{\"stop_reason\":\"refusal\"}}\n\nevent: message_stop\ndata: {}\n\n",
		"data: " + strings.Repeat("x", 80) + "\n\n",
		"",
	}
	for _, s := range seeds {
		f.Add([]byte(s), []byte{5, 1, 63}, uint(len(s)/2))
	}
	tr := &bodyTransport{}
	p, err := New(Config{APIKey: testKey, BaseURL: "http://127.0.0.1", MaxResponseBytes: 256,
		HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body, sizes []byte, keyAt uint) {
		if keyAt%2 == 1 { // half the runs echo the key somewhere
			body = withKey(body, keyAt/2)
		}
		tr.body, tr.sizes = body, sizes
		st, err := p.Stream(context.Background(), userReq)
		if err != nil {
			t.Fatalf("Stream: %v", err)
		}
		defer st.Close()
		var text strings.Builder
		for {
			c, err := st.Next()
			if err == io.EOF {
				if !bytes.Contains(body, []byte("message_stop")) {
					t.Fatalf("io.EOF from a stream without message_stop: %q", body)
				}
				break
			}
			if err != nil {
				e := checkError(t, err, 200)
				if e.RequestID != "req_1" {
					t.Fatalf("error without the request id: %#v", e)
				}
				break
			}
			if c.Text == "" {
				t.Fatal("an empty chunk")
			}
			text.WriteString(c.Text)
		}
		if res := st.Response(); res.Text != text.String() || res.RequestID != "req_1" || len(res.Text) > 256 {
			t.Fatalf("Response %+v; want the text of the chunks %q", res, text.String())
		}
		if st.Close() != nil {
			t.Fatal("Close failed")
		}
		if _, err := st.Next(); err == nil {
			t.Fatal("Next after the end and Close succeeded")
		}
	})
}
