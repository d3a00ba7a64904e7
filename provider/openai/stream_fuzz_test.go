package openai

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
		Header: http.Header{"Content-Type": {"text/event-stream"}, "X-Request-Id": {"req_1"}},
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
		"data: {\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\r\n\r\n",
		"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}\r\rdata: [DONE]\r\r",
		"data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"code\":\"rate_limit_exceeded\"}}\n\n",
		"event: error\ndata: {\"error\":\"x\"}\n\n",
		"data: {\"choices\":[{\"delta\":{\"refusal\":\"no\"},\"finish_reason\":\"content_filter\"}]}\n\ndata: [DONE]\n\n",
		": ping\n\ndata:\n\ndata: {\ndata: }\n\n",
		"data: " + strings.Repeat("x", 300) + "\n\n",
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
				if !bytes.Contains(body, []byte("[DONE]")) {
					t.Fatalf("io.EOF from a stream without [DONE]: %q", body)
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
