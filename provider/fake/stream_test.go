package fake_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/backstop-llm/backstop/provider/fake"
)

// streamBody is a minimal valid request body asking for a stream.
func streamBody(f fake.Format, model string, includeUsage bool) string {
	if f == fake.Anthropic {
		return fmt.Sprintf(`{"model":%q,"max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)
	}
	if includeUsage {
		return fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, model)
	}
	return fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, model)
}

// sse is one server-sent event as a client parses it.
type sse struct {
	name string // the event: field, "" when absent
	data string // the data: lines, joined with \n
}

// readEvent reads one event. It returns io.EOF at a clean end of the body
// between events, and the body's error otherwise.
func readEvent(br *bufio.Reader) (sse, error) {
	var e sse
	var data []string
	seen := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF && (seen || line != "") {
				err = io.ErrUnexpectedEOF // an event cut short
			}
			return e, err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if !seen {
				continue
			}
			e.data = strings.Join(data, "\n")
			return e, nil
		case strings.HasPrefix(line, ":"): // a comment
		case strings.HasPrefix(line, "event: "):
			e.name, seen = strings.TrimPrefix(line, "event: "), true
		case strings.HasPrefix(line, "data: "):
			data, seen = append(data, strings.TrimPrefix(line, "data: ")), true
		default:
			return e, fmt.Errorf("unexpected line %q", line)
		}
	}
}

// timedEvent is an event and when it arrived, since the test's start.
type timedEvent struct {
	sse
	at time.Duration
}

// readEvents reads events until the body ends; err is io.EOF at a clean
// end.
func readEvents(body io.Reader, start time.Time) (evs []timedEvent, err error) {
	br := bufio.NewReader(body)
	for {
		e, err := readEvent(br)
		if err != nil {
			return evs, err
		}
		evs = append(evs, timedEvent{e, time.Since(start)})
	}
}

// label summarises an event for comparisons: Anthropic events by name
// (deltas with their text, errors with their type), OpenAI chunks by role,
// text, finish reason, usage, error or [DONE]. A malformed event is
// labelled "malformed: …".
func label(e sse) string {
	if e.name != "" {
		var v struct{ Type string }
		if json.Unmarshal([]byte(e.data), &v) != nil || v.Type != e.name {
			return "malformed: " + e.data
		}
		switch e.name {
		case "content_block_delta":
			var v struct{ Delta struct{ Type, Text string } }
			_ = json.Unmarshal([]byte(e.data), &v)
			return "delta:" + v.Delta.Text
		case "error":
			var v struct{ Error struct{ Type string } }
			_ = json.Unmarshal([]byte(e.data), &v)
			return "error:" + v.Error.Type
		}
		return e.name
	}
	if e.data == "[DONE]" {
		return "[DONE]"
	}
	var v struct {
		Object  string
		Choices []struct {
			Delta struct {
				Role    string
				Content *string
			}
			FinishReason *string `json:"finish_reason"`
		}
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
		Error *struct{ Type string }
	}
	switch err := json.Unmarshal([]byte(e.data), &v); {
	case err != nil:
		return "malformed: " + e.data
	case v.Error != nil:
		return "error:" + v.Error.Type
	case v.Object != "chat.completion.chunk":
		return "malformed: " + e.data
	case len(v.Choices) == 0 && v.Usage != nil:
		return fmt.Sprintf("usage:%d+%d", v.Usage.PromptTokens, v.Usage.CompletionTokens)
	case len(v.Choices) != 1:
		return "malformed: " + e.data
	case v.Choices[0].FinishReason != nil:
		return "finish:" + *v.Choices[0].FinishReason
	case v.Choices[0].Delta.Role != "":
		return "role:" + v.Choices[0].Delta.Role
	case v.Choices[0].Delta.Content != nil:
		return "text:" + *v.Choices[0].Delta.Content
	}
	return "malformed: " + e.data
}

func labels(evs []timedEvent) []string {
	ls := make([]string, len(evs))
	for i, e := range evs {
		ls[i] = label(e.sse)
	}
	return ls
}

// timeline is labels with arrival times: "delta:a@2s".
func timeline(evs []timedEvent) []string {
	ls := make([]string, len(evs))
	for i, e := range evs {
		ls[i] = fmt.Sprintf("%s@%v", label(e.sse), e.at)
	}
	return ls
}

// streamText reassembles the text of a stream's deltas.
func streamText(evs []timedEvent) string {
	var b strings.Builder
	for _, l := range labels(evs) {
		if t, ok := strings.CutPrefix(l, "delta:"); ok {
			b.WriteString(t)
		} else if t, ok := strings.CutPrefix(l, "text:"); ok {
			b.WriteString(t)
		}
	}
	return b.String()
}

// head and tail are the labels of a complete stream's opening and closing
// events, without usage (tail's finish is OpenAI's finish_reason).
func head(f fake.Format) []string {
	if f == fake.Anthropic {
		return []string{"message_start", "content_block_start", "ping"}
	}
	return []string{"role:assistant"} // role and empty content
}

func tail(f fake.Format, finish string) []string {
	if f == fake.Anthropic {
		return []string{"content_block_stop", "message_delta", "message_stop"}
	}
	return []string{"finish:" + finish, "[DONE]"}
}

// deltas labels texts as f's text chunks.
func deltas(f fake.Format, texts ...string) []string {
	prefix := "delta:"
	if f == fake.OpenAI {
		prefix = "text:"
	}
	ls := make([]string, len(texts))
	for i, t := range texts {
		ls[i] = prefix + t
	}
	return ls
}

func concat(parts ...[]string) []string { return slices.Concat(parts...) }

// openStream sends a streamed request and returns the response; the caller
// closes its body.
func openStream(t *testing.T, ctx context.Context, c *http.Client, base string, f fake.Format, model string) *http.Response {
	t.Helper()
	resp, err := c.Do(newRequest(t, ctx, base, f, streamBody(f, model, false)))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

var formats = []fake.Format{fake.Anthropic, fake.OpenAI}

func TestStreamAnthropicWire(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script("m", fake.Answer("Hi there, you"))
		body := streamBody(fake.Anthropic, "m", false)
		resp, raw, err := readStream(t, c, newRequest(t, context.Background(), base, fake.Anthropic, body))
		if err != nil {
			t.Fatal(err)
		}
		in, out := tokens(len(body)), tokens(len("Hi there, you"))
		startUsage := fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,`+
			`"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,`+
			`"output_tokens_details":{"thinking_tokens":0},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},`+
			`"service_tier":"standard","inference_geo":"global","speed":"standard"}`, in)
		deltaUsage := fmt.Sprintf(`{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":%d,`+
			`"output_tokens_details":{"thinking_tokens":0},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0}}`, in, out)
		want := "event: message_start\n" +
			`data: {"type":"message_start","message":{"id":"msg_fake_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"stop_details":null,"container":null,"diagnostics":null,"usage":` + startUsage + "}}\n\n" +
			"event: content_block_start\n" +
			`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"","citations":null}}` + "\n\n" +
			"event: ping\n" +
			`data: {"type":"ping"}` + "\n\n"
		for _, p := range []string{"Hi", " there,", " you"} {
			want += "event: content_block_delta\n" +
				`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + p + `"}}` + "\n\n"
		}
		want += "event: content_block_stop\n" +
			`data: {"type":"content_block_stop","index":0}` + "\n\n" +
			"event: message_delta\n" +
			`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null,"stop_details":null,"container":null},"usage":` + deltaUsage + "}\n\n" +
			"event: message_stop\n" +
			`data: {"type":"message_stop"}` + "\n\n"
		if string(raw) != want {
			t.Errorf("stream:\n got %s\nwant %s", raw, want)
		}
		if resp.StatusCode != 200 || resp.ContentLength != -1 {
			t.Errorf("status %d, content length %d", resp.StatusCode, resp.ContentLength)
		}
		checkHeaders(t, resp.Header, map[string]string{
			"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
			"Request-Id": "req_fake_1", "Content-Length": "", "X-Request-Id": "",
		})
		calls := s.Calls("m")
		if s.Requests("m") != 1 || len(calls) != 1 || string(calls[0].Body) != body ||
			!strings.Contains(string(calls[0].Body), `"stream":true`) {
			t.Errorf("recorded %d requests: %+v", s.Requests("m"), calls)
		}
	})
}

func TestStreamOpenAIWire(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		for _, includeUsage := range []bool{false, true} {
			s.Script("m", fake.Answer("Hi there").ID("chatcmpl-x").Model("gpt-served").Finish("length").RequestID("req_x"))
			body := streamBody(fake.OpenAI, "m", includeUsage)
			resp, raw, err := readStream(t, c, newRequest(t, context.Background(), base, fake.OpenAI, body))
			if err != nil {
				t.Fatal(err)
			}
			u := ""
			if includeUsage {
				u = `,"usage":null`
			}
			chunk := func(choice string) string {
				return `data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":0,"model":"gpt-served","service_tier":"default","system_fingerprint":"fp_fake","choices":[` +
					choice + `]` + u + "}\n\n"
			}
			want := chunk(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`) +
				chunk(`{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}`) +
				chunk(`{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}`) +
				chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}`)
			if includeUsage {
				in, out := tokens(len(body)), tokens(len("Hi there"))
				want += fmt.Sprintf(`data: {"id":"chatcmpl-x","object":"chat.completion.chunk","created":0,"model":"gpt-served","service_tier":"default","system_fingerprint":"fp_fake","choices":[],`+
					`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d,`+
					`"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},`+
					`"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`+"\n\n", in, out, in+out)
			}
			want += "data: [DONE]\n\n"
			if got := created.ReplaceAllString(string(raw), `"created":0`); got != want {
				t.Errorf("include_usage %v:\n got %s\nwant %s", includeUsage, got, want)
			}
			// Every chunk has the same, current, created.
			cs := created.FindAllString(string(raw), -1)
			if len(cs) < 4 || len(slices.Compact(slices.Clone(cs))) != 1 {
				t.Errorf("created values %v", cs)
			}
			checkHeaders(t, resp.Header, map[string]string{
				"Content-Type": "text/event-stream; charset=utf-8", "X-Request-Id": "req_x", "Request-Id": "",
			})
		}
	})
}

func TestStreamAnswerModifiers(t *testing.T) {
	s := fake.New()
	// Usage, Finish with a stop sequence, Header overriding a generated header.
	s.Script("m", fake.Answer("x").Usage(7, 3).Finish("stop_sequence").Header("Cache-Control", "").Header("X-Extra", "1"))
	body := `{"model":"m","max_tokens":5,"stream":true,"stop_sequences":["END"],"messages":[{"role":"user","content":"hi"}]}`
	r := do(t, s.Client(), newRequest(t, context.Background(), s.URL(), fake.Anthropic, body))
	for _, frag := range []string{
		`"usage":{"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,`,
		`{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END","stop_details":null,"container":null},"usage":{"input_tokens":7,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":3,`,
	} {
		if !strings.Contains(r.body, frag) {
			t.Errorf("stream lacks %s:\n%s", frag, r.body)
		}
	}
	checkHeaders(t, r.header, map[string]string{"Cache-Control": "", "X-Extra": "1"})
}

func TestStreamDefaultChunks(t *testing.T) {
	s := fake.New()
	c := s.Client()
	chunksOf := func(t *testing.T, f fake.Format, o fake.Outcome) []string {
		t.Helper()
		s.Script("m", o)
		resp := openStream(t, context.Background(), c, s.URL(), f, "m")
		defer resp.Body.Close()
		evs, err := readEvents(resp.Body, time.Now())
		if err != io.EOF {
			t.Fatalf("read: %v", err)
		}
		var got []string
		for _, l := range labels(evs) {
			if t, ok := strings.CutPrefix(l, "delta:"); ok {
				got = append(got, t)
			} else if t, ok := strings.CutPrefix(l, "text:"); ok {
				got = append(got, t)
			}
		}
		return got
	}
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Hello world, how are you?", []string{"Hello", " world,", " how", " are", " you?"}},
		{"  two  spaces\n", []string{"  two", "  spaces", "\n"}},
		{`{"ok":true,"list":[1,2,3]}`, []string{`{"ok":true,"list`, `":[1,2,3]}`}},
		{"", nil},
	} {
		for _, f := range formats {
			if got := chunksOf(t, f, fake.Answer(tc.text)); !slices.Equal(got, tc.want) {
				t.Errorf("%v %q: chunks %q, want %q", f, tc.text, got, tc.want)
			}
		}
	}
	// Any text: the chunks reassemble it, hold at most 16 bytes and cut at
	// UTF-8 boundaries.
	for _, text := range []string{
		"héllo wörld ünïcödé-ünïcödé-ünïcödé 日本語のテキストはスペースがありません",
		strings.Repeat("abcdefghij", 10),
		"tab\tnew\nline  \t end ",
	} {
		got := chunksOf(t, fake.Anthropic, fake.Answer(text))
		if strings.Join(got, "") != text {
			t.Errorf("%q: chunks %q do not reassemble it", text, got)
		}
		for _, p := range got {
			if len(p) > 16 || len(p) == 0 || !utf8.ValidString(p) {
				t.Errorf("%q: bad chunk %q", text, p)
			}
		}
	}
	// Explicit chunks, empty ones included; no chunks at all.
	for _, f := range formats {
		if got := chunksOf(t, f, fake.Answer("ignored").Chunks("a", "", "b c")); !slices.Equal(got, []string{"a", "", "b c"}) {
			t.Errorf("%v explicit chunks %q", f, got)
		}
	}
	s.Script("m", fake.Answer("x").Chunks("a", "", "b c"))
	resp := openStream(t, context.Background(), c, s.URL(), fake.OpenAI, "m")
	evs, _ := readEvents(resp.Body, time.Now())
	resp.Body.Close()
	if got, want := labels(evs), concat(head(fake.OpenAI), deltas(fake.OpenAI, "a", "", "b c"), tail(fake.OpenAI, "stop")); !slices.Equal(got, want) {
		t.Errorf("openai explicit chunks %q, want %q", got, want)
	}
	s.Script("m", fake.Answer("x").Chunks())
	resp = openStream(t, context.Background(), c, s.URL(), fake.Anthropic, "m")
	evs, _ = readEvents(resp.Body, time.Now())
	resp.Body.Close()
	if got, want := labels(evs), concat(head(fake.Anthropic), tail(fake.Anthropic, "")); !slices.Equal(got, want) {
		t.Errorf("no chunks: %q, want %q", got, want)
	}
}

func TestStreamModifiersIgnoredWithoutStream(t *testing.T) {
	s := fake.New()
	c := s.Client()
	o := fake.Answer("x").Chunks("Hello", ", ", "world").Every(time.Hour).FirstChunkAfter(time.Hour).ErrorAfter(1).Type("t")
	for _, o := range []fake.Outcome{o, o.StallAfter(0), o.CutAfter(0)} {
		s.Script("m", o)
		for _, f := range formats {
			r := call(t, c, s.URL(), f, "m")
			if got := text(t, r); got != "Hello, world" || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("%v: %q %v", f, got, r.header)
			}
		}
	}
	// stream: false is no stream.
	s.Script("m", fake.Answer("plain"))
	body := `{"model":"m","max_tokens":5,"stream":false,"messages":[{"role":"user","content":"hi"}]}`
	if got := text(t, do(t, c, newRequest(t, context.Background(), s.URL(), fake.Anthropic, body))); got != "plain" {
		t.Errorf("stream false: %q", got)
	}
}

func TestStreamTiming(t *testing.T) {
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := fake.New()
				s.Script("m", fake.Answer("").Chunks("a", "b", "c").
					After(time.Second).FirstChunkAfter(2*time.Second).Every(500*time.Millisecond))
				start := time.Now()
				resp := openStream(t, context.Background(), s.Client(), s.URL(), f, "m")
				defer resp.Body.Close()
				if got := time.Since(start); got != time.Second {
					t.Errorf("headers after %v, want 1s (After)", got)
				}
				evs, err := readEvents(resp.Body, start)
				if err != io.EOF {
					t.Fatalf("read: %v", err)
				}
				at := func(d time.Duration, ls ...string) []string {
					for i := range ls {
						ls[i] += "@" + d.String()
					}
					return ls
				}
				want := concat(
					at(time.Second, head(f)...),
					at(3*time.Second, deltas(f, "a")...),
					at(3500*time.Millisecond, deltas(f, "b")...),
					at(4*time.Second, concat(deltas(f, "c"), tail(f, "stop"))...),
				)
				if got := timeline(evs); !slices.Equal(got, want) {
					t.Errorf("timeline\n got %q\nwant %q", got, want)
				}
			})
		})
	}
}

// TestStreamTimingConcurrent checks that each stream keeps its own clock.
func TestStreamTimingConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fake.New()
		s.Script("m", fake.Answer("").Chunks("a", "b").Every(time.Second))
		start := time.Now()
		var wg sync.WaitGroup
		got := make([][]string, 3)
		for i := range 3 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 300 * time.Millisecond)
				f := formats[i%2]
				resp, err := s.Client().Do(newRequest(t, context.Background(), s.URL(), f, streamBody(f, "m", false)))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				evs, _ := readEvents(resp.Body, start)
				for _, e := range evs {
					if l := label(e.sse); l == "delta:b" || l == "text:b" {
						got[i] = append(got[i], e.at.String())
					}
				}
			})
		}
		wg.Wait()
		if want := [][]string{{"1s"}, {"1.3s"}, {"1.6s"}}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("second chunks at %v, want %v", got, want)
		}
	})
}

func TestStreamErrorAfter(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		o := fake.Answer("").Chunks("a", "b", "c")
		for _, tc := range []struct {
			o    fake.Outcome
			sent []string
			data map[fake.Format]string
		}{
			{o.ErrorAfter(1), []string{"a"}, map[fake.Format]string{
				fake.Anthropic: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
				fake.OpenAI:    `{"error":{"message":"The server experienced an error while processing your request. We apologize for the inconvenience!","type":"server_error","param":null,"code":null}}`,
			}},
			{o.ErrorAfter(0).Type("api_error").Message("Internal server error").Code("oops"), nil, map[fake.Format]string{
				fake.Anthropic: `{"type":"error","error":{"type":"api_error","message":"Internal server error","details":{"error_code":"oops"}}}`,
				fake.OpenAI:    `{"error":{"message":"Internal server error","type":"api_error","param":null,"code":"oops"}}`,
			}},
			{o.StallAfter(0).ErrorAfter(99), []string{"a", "b", "c"}, map[fake.Format]string{ // clamped; the last fault wins
				fake.Anthropic: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
				fake.OpenAI:    `{"error":{"message":"The server experienced an error while processing your request. We apologize for the inconvenience!","type":"server_error","param":null,"code":null}}`,
			}},
		} {
			for _, f := range formats {
				s.Script("m", tc.o)
				resp := openStream(t, context.Background(), c, base, f, "m")
				evs, err := readEvents(resp.Body, time.Now())
				resp.Body.Close()
				if err != io.EOF {
					t.Errorf("%v: the body ended with %v, want a clean end after the error event", f, err)
				}
				if resp.StatusCode != 200 {
					t.Errorf("%v: status %d", f, resp.StatusCode)
				}
				typ := map[fake.Format]string{fake.Anthropic: "overloaded_error", fake.OpenAI: "server_error"}[f]
				if strings.Contains(tc.data[f], "api_error") {
					typ = "api_error"
				}
				want := concat(head(f), deltas(f, tc.sent...), []string{"error:" + typ})
				if f == fake.OpenAI {
					want = append(want, "[DONE]")
				}
				if got := labels(evs); !slices.Equal(got, want) {
					t.Errorf("%v: events %q, want %q", f, got, want)
					continue
				}
				errEv := evs[len(evs)-1]
				if f == fake.OpenAI {
					errEv = evs[len(evs)-2]
				}
				if errEv.data != tc.data[f] || (f == fake.Anthropic) != (errEv.name == "error") {
					t.Errorf("%v: error event %q %s, want %s", f, errEv.name, errEv.data, tc.data[f])
				}
			}
		}
	})
}

func TestStreamFaultTiming(t *testing.T) {
	o := fake.Answer("").Chunks("a", "b", "c").FirstChunkAfter(2 * time.Second).Every(time.Second)
	for _, tc := range []struct {
		name string
		o    fake.Outcome
		want []string // the deltas' and the fault's times
		err  error    // how the body ends
	}{
		{"error after 2", o.ErrorAfter(2), []string{"a@2s", "b@3s", "error@4s"}, io.EOF},
		{"error after 0", o.ErrorAfter(0), []string{"error@2s"}, io.EOF},
		{"cut after 2", o.CutAfter(2), []string{"a@2s", "b@3s", "cut@4s"}, io.ErrUnexpectedEOF},
		{"cut after 0", o.CutAfter(0), []string{"cut@2s"}, io.ErrUnexpectedEOF},
	} {
		for _, f := range formats {
			t.Run(tc.name+"/"+f.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := fake.New()
					s.Script("m", tc.o)
					start := time.Now()
					resp := openStream(t, context.Background(), s.Client(), s.URL(), f, "m")
					defer resp.Body.Close()
					evs, err := readEvents(resp.Body, start)
					if !errors.Is(err, tc.err) {
						t.Errorf("body ended with %v, want %v", err, tc.err)
					}
					var got []string
					for _, e := range evs {
						l := label(e.sse)
						if t, ok := strings.CutPrefix(l, "delta:"); ok {
							l = t
						} else if t, ok := strings.CutPrefix(l, "text:"); ok {
							l = t
						} else if strings.HasPrefix(l, "error:") {
							l = "error"
						} else {
							continue
						}
						got = append(got, fmt.Sprintf("%s@%v", l, e.at))
					}
					if tc.err == io.ErrUnexpectedEOF {
						got = append(got, fmt.Sprintf("cut@%v", time.Since(start)))
					}
					if !slices.Equal(got, tc.want) {
						t.Errorf("got %q, want %q", got, tc.want)
					}
				})
			})
		}
	}
}

func TestStreamStallAfter(t *testing.T) {
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := fake.New()
				var ended time.Duration
				start := time.Now()
				s.Script("m", fake.Answer("").Chunks("a", "b", "c").Every(time.Second).StallAfter(2).
					OnDone(func() { ended = time.Since(start) }))
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				resp := openStream(t, ctx, s.Client(), s.URL(), f, "m")
				defer resp.Body.Close()
				evs, err := readEvents(resp.Body, start)
				if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Minute {
					t.Errorf("read ended with %v after %v, want DeadlineExceeded after 1m", err, time.Since(start))
				}
				if got, want := timeline(evs), deltas(f, "a@0s", "b@1s"); len(got) < len(head(f)) || !slices.Equal(got[len(head(f)):], want) {
					t.Errorf("timeline %q, want head then %q", got, want)
				}
				synctest.Wait()
				if ended != time.Minute {
					t.Errorf("handler ended after %v, want 1m", ended)
				}
			})
		})
	}
}

// TestStreamStallCloseFromAnotherGoroutine: a reader blocked on a stalled
// body returns when another goroutine closes the body, as with a real
// connection.
func TestStreamStallCloseFromAnotherGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fake.New()
		done := false
		s.Script("m", fake.Answer("a").StallAfter(1).OnDone(func() { done = true }))
		resp := openStream(t, context.Background(), s.Client(), s.URL(), fake.Anthropic, "m")
		start := time.Now()
		time.AfterFunc(5*time.Second, func() { resp.Body.Close() })
		evs, err := readEvents(resp.Body, start)
		if err == nil || err == io.EOF || time.Since(start) != 5*time.Second || len(evs) != 4 {
			t.Errorf("read ended with %v after %v and %d events", err, time.Since(start), len(evs))
		}
		synctest.Wait()
		if !done {
			t.Error("the stalled handler did not end when the body was closed")
		}
	})
}

func TestStreamStallLoopback(t *testing.T) {
	s := fake.New()
	c := startLoopback(t, s)
	done := make(chan struct{})
	s.Script("m", fake.Answer("a b c").StallAfter(1).OnDone(func() { close(done) }))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	resp := openStream(t, ctx, c, s.URL(), fake.OpenAI, "m")
	defer resp.Body.Close()
	evs, err := readEvents(resp.Body, start)
	// The stall holds the body open until the client gives up: the read
	// ends with an error once the context has ended, never before. (Not a
	// wall-clock check: ctx's deadline was set before start was read.)
	if err == nil || err == io.EOF || ctx.Err() == nil {
		t.Errorf("read ended with %v after %v, context %v; want an error once the context ended", err, time.Since(start), ctx.Err())
	}
	if got := labels(evs); !slices.Equal(got, []string{"role:assistant", "text:a"}) {
		t.Errorf("events %q", got)
	}
	waitDone(t, done, "the stalled handler did not end when the client gave up")
}

func TestStreamCutAfter(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		for _, f := range formats {
			s.Script("m", fake.Answer("").Chunks("a", "b", "c").CutAfter(2), fake.Answer("next"))
			resp := openStream(t, context.Background(), c, base, f, "m")
			evs, err := readEvents(resp.Body, time.Now())
			resp.Body.Close()
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("%v: body ended with %v, want io.ErrUnexpectedEOF", f, err)
			}
			if got, want := labels(evs), concat(head(f), deltas(f, "a", "b")); !slices.Equal(got, want) {
				t.Errorf("%v: events %q, want %q", f, got, want)
			}
			// The next request is served normally.
			if got := text(t, call(t, c, base, f, "m")); got != "next" {
				t.Errorf("%v: after a cut: %q", f, got)
			}
		}
	})
}

// TestStreamCutRawRead checks the in-process cut at the level of Read: the
// bytes before the cut, then an error wrapping io.ErrUnexpectedEOF.
func TestStreamCutRawRead(t *testing.T) {
	s := fake.New()
	s.Script("m", fake.Answer("").Chunks("a").CutAfter(1))
	resp := openStream(t, context.Background(), s.Client(), s.URL(), fake.Anthropic, "m")
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.HasSuffix(string(b), `"text":"a"}}`+"\n\n") {
		t.Errorf("read %q, %v", b, err)
	}
}

func TestStreamStatusOutcomes(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		for _, o := range []fake.Outcome{
			fake.Overloaded(), fake.RateLimited("2"), fake.SpendCap(), fake.ContextTooLong(),
			fake.ServerError(), fake.Status(401), fake.Status(502).Body("<html>Bad Gateway</html>").Header("Content-Type", "text/html"),
		} {
			for _, f := range formats {
				// RequestID fixes the id, which otherwise follows the request's sequence number.
				s.Script("m", o.RequestID("req_x").FirstChunkAfter(time.Hour).Every(time.Hour).ErrorAfter(0))
				plain := call(t, c, base, f, "m")
				streamed := do(t, c, newRequest(t, context.Background(), base, f, streamBody(f, "m", false)))
				if plain.status < 400 || streamed.status != plain.status || streamed.body != plain.body {
					t.Errorf("%v: streamed %d %s, plain %d %s", f, streamed.status, streamed.body, plain.status, plain.body)
				}
				for _, k := range []string{"Content-Type", "Retry-After", "Request-Id", "X-Request-Id", "Content-Length"} {
					if streamed.header.Get(k) != plain.header.Get(k) {
						t.Errorf("%v: header %s: streamed %q, plain %q", f, k, streamed.header.Get(k), plain.header.Get(k))
					}
				}
			}
		}
		// A reset is a reset.
		s.Script("m", fake.ConnReset())
		_, err := c.Do(newRequest(t, context.Background(), base, fake.OpenAI, streamBody(fake.OpenAI, "m", true)))
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Errorf("reset on a streamed request: %v", err)
		}
		// Rejected requests are rejected in JSON.
		req := newRequest(t, context.Background(), base, fake.Anthropic, streamBody(fake.Anthropic, "m", false))
		req.Header.Del("X-Api-Key")
		if r := do(t, c, req); r.status != 401 || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("rejected streamed request: %d %v", r.status, r.header)
		}
	})
}

func TestStreamHangAndAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fake.New()
		s.Script("m", fake.Hang(), fake.Answer("late").After(time.Hour))
		for range 2 {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			start := time.Now()
			_, err := s.Client().Do(newRequest(t, ctx, s.URL(), fake.Anthropic, streamBody(fake.Anthropic, "m", false)))
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 3*time.Second {
				t.Errorf("err %v after %v", err, time.Since(start))
			}
		}
	})
}

func TestStreamMalformed(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		raw := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\n\n"
		s.Script("m", fake.Malformed(raw))
		r := do(t, c, newRequest(t, context.Background(), base, fake.Anthropic, streamBody(fake.Anthropic, "m", false)))
		if r.status != 200 || r.body != raw || r.header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
			t.Errorf("got %d %v %q", r.status, r.header, r.body)
		}
		s.Script("m", fake.Malformed(`{"not":"a stream"}`).Header("Content-Type", "application/json"))
		r = do(t, c, newRequest(t, context.Background(), base, fake.OpenAI, streamBody(fake.OpenAI, "m", false)))
		if r.body != `{"not":"a stream"}` || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("got %v %q", r.header, r.body)
		}
	})
}

func TestStreamEarlyCloseInProcess(t *testing.T) {
	for _, f := range formats {
		synctest.Test(t, func(t *testing.T) {
			s := fake.New()
			var ended time.Duration
			start := time.Now()
			s.Script("m", fake.Answer(strings.Repeat("word ", 100)).Every(time.Second).
				OnDone(func() { ended = time.Since(start) }))
			resp := openStream(t, context.Background(), s.Client(), s.URL(), f, "m")
			br := bufio.NewReader(resp.Body)
			for range len(head(f)) + 3 {
				if _, err := readEvent(br); err != nil {
					t.Fatal(err)
				}
			}
			resp.Body.Close()
			synctest.Wait() // the handler ends at once; synctest.Test fails on a goroutine left blocked
			if ended != 2*time.Second {
				t.Errorf("handler ended at %v, want 2s (when the body was closed)", ended)
			}
			if _, err := br.ReadByte(); err == nil {
				t.Error("read after close succeeded")
			}
		})
	}
}

func TestStreamEarlyCloseLoopback(t *testing.T) {
	s := fake.New()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	for _, f := range formats {
		done := make(chan struct{})
		s.Script("m", fake.Answer(strings.Repeat("word ", 100)).Every(time.Hour).OnDone(func() { close(done) }))
		resp := openStream(t, context.Background(), c, s.URL(), f, "m")
		br := bufio.NewReader(resp.Body)
		for range len(head(f)) + 1 {
			if _, err := readEvent(br); err != nil {
				t.Fatal(err)
			}
		}
		resp.Body.Close()
		waitDone(t, done, fmt.Sprintf("%v: the handler did not end when the client closed the body", f))
	}
	tr.CloseIdleConnections()
	s.Close()
	goleak.VerifyNone(t)
}

func TestStreamConcurrency(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		const clients, each = 40, 5
		// The answer echoes the request's message; odd requests fail mid-stream.
		s.Handle("m", func(call fake.Call) fake.Outcome {
			var body struct {
				Messages []struct{ Content string }
			}
			if err := json.Unmarshal(call.Body, &body); err != nil || len(body.Messages) == 0 {
				return fake.BadRequest("unreadable")
			}
			o := fake.Answer("echo of " + body.Messages[0].Content + " in several words").Every(time.Millisecond)
			if strings.HasSuffix(body.Messages[0].Content, "odd") {
				o = o.ErrorAfter(2)
			}
			return o
		})
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				for j := range each {
					f := formats[(i+j)%2]
					msg := fmt.Sprintf("request %d-%d", i, j)
					if j%2 == 1 {
						msg += " odd"
					}
					body := strings.Replace(streamBody(f, "m", j%3 == 0), `"hi"`, fmt.Sprintf("%q", msg), 1)
					resp, err := c.Do(newRequest(t, context.Background(), base, f, body))
					if err != nil {
						t.Error(err)
						return
					}
					evs, err := readEvents(resp.Body, time.Now())
					resp.Body.Close()
					ls := labels(evs)
					switch {
					case err != io.EOF:
						t.Errorf("%s: %v", msg, err)
					case j%2 == 1 && !slices.ContainsFunc(ls, func(l string) bool { return strings.HasPrefix(l, "error:") }):
						t.Errorf("%s: no error in %q", msg, ls)
					case j%2 == 1 && streamText(evs) != "echo of":
						t.Errorf("%s: text before the error %q", msg, streamText(evs))
					case j%2 == 0 && streamText(evs) != "echo of "+msg+" in several words":
						t.Errorf("%s: text %q", msg, streamText(evs))
					}
				}
			})
		}
		wg.Wait()
		if n := s.Requests("m"); n != clients*each {
			t.Errorf("requests %d", n)
		}
		for _, cl := range s.Calls("m") {
			if !strings.Contains(string(cl.Body), `"stream":true`) {
				t.Errorf("recorded body %s", cl.Body)
			}
		}
	})
}

// ServeHTTP streams in a server of the caller's too, over TLS and HTTP/2:
// events flushed one by one, a cut that fails the client's read.
func TestStreamMountedInHTTPTest(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			s := fake.New()
			s.Script("m", fake.Answer("a b").StallAfter(1), fake.Answer("").Chunks("a", "b").CutAfter(1), fake.Answer("a b"))
			ts, c := mountedTLS(t, s, h2)

			// Stalled after one chunk: the chunk arrives, flushed.
			ctx, cancel := context.WithCancel(context.Background())
			resp := openStream(t, ctx, c, ts.URL, fake.Anthropic, "m")
			br := bufio.NewReader(resp.Body)
			var got []string
			for range 4 {
				e, err := readEvent(br)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, label(e))
			}
			cancel()
			resp.Body.Close()
			if want := concat(head(fake.Anthropic), deltas(fake.Anthropic, "a")); !slices.Equal(got, want) {
				t.Errorf("stalled stream %q, want %q", got, want)
			}

			// Cut: the read fails.
			resp = openStream(t, context.Background(), c, ts.URL, fake.OpenAI, "m")
			evs, err := readEvents(resp.Body, time.Now())
			resp.Body.Close()
			if err == nil || err == io.EOF || !slices.Equal(labels(evs), concat(head(fake.OpenAI), deltas(fake.OpenAI, "a"))) {
				t.Errorf("cut stream: %q, %v", labels(evs), err)
			}

			// Complete.
			resp = openStream(t, context.Background(), c, ts.URL, fake.OpenAI, "m")
			evs, err = readEvents(resp.Body, time.Now())
			resp.Body.Close()
			if err != io.EOF || streamText(evs) != "a b" {
				t.Errorf("stream %q, %v", labels(evs), err)
			}
		})
	}
}

func TestStreamPauseAfter(t *testing.T) {
	o := fake.Answer("").Chunks("a", "b", "c").FirstChunkAfter(time.Second).Every(time.Second)
	for _, tc := range []struct {
		name string
		o    fake.Outcome
		want []string // the deltas' times and the end's
	}{
		{"pause after 2", o.PauseAfter(2, 30*time.Second), []string{"a@1s", "b@2s", "c@33s", "end@33s"}},
		{"pause after 0", o.PauseAfter(0, 30*time.Second), []string{"a@31s", "b@32s", "c@33s", "end@33s"}},
		{"pause after all", o.PauseAfter(3, 30*time.Second), []string{"a@1s", "b@2s", "c@3s", "end@33s"}},
		{"pause then cut", o.PauseAfter(1, 30*time.Second).CutAfter(1), []string{"a@1s", "cut@32s"}},
	} {
		for _, f := range formats {
			t.Run(tc.name+"/"+f.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					s := fake.New()
					s.Script("m", tc.o)
					start := time.Now()
					resp := openStream(t, context.Background(), s.Client(), s.URL(), f, "m")
					defer resp.Body.Close()
					evs, err := readEvents(resp.Body, start)
					var got []string
					for _, e := range evs {
						l := label(e.sse)
						for _, prefix := range []string{"delta:", "text:"} {
							if t, ok := strings.CutPrefix(l, prefix); ok {
								got = append(got, fmt.Sprintf("%s@%v", t, e.at))
							}
						}
					}
					switch {
					case err == io.EOF:
						got = append(got, fmt.Sprintf("end@%v", evs[len(evs)-1].at))
						if l := labels(evs); !slices.Equal(l[len(l)-len(tail(f, "stop")):], tail(f, "stop")) {
							t.Errorf("stream ends %q, want %q", l, tail(f, "stop"))
						}
					case errors.Is(err, io.ErrUnexpectedEOF):
						got = append(got, fmt.Sprintf("cut@%v", time.Since(start)))
					default:
						t.Fatalf("read: %v", err)
					}
					if !slices.Equal(got, tc.want) {
						t.Errorf("got %q, want %q", got, tc.want)
					}
				})
			})
		}
	}
}

func TestStreamMalformedEventAfter(t *testing.T) {
	const bad = `{"choices":[{"delta":{"content":"Hel`
	for _, n := range []int{0, 1, 2, 9} {
		for _, f := range formats {
			t.Run(fmt.Sprintf("after %d/%s", n, f), func(t *testing.T) {
				s := fake.New()
				s.Script("m", fake.Answer("").Chunks("a", "b").MalformedEventAfter(n, bad))
				resp := openStream(t, context.Background(), s.Client(), s.URL(), f, "m")
				defer resp.Body.Close()
				evs, err := readEvents(resp.Body, time.Now())
				if err != io.EOF {
					t.Fatalf("read: %v", err)
				}
				k := min(n, 2)
				ds := deltas(f, "a", "b")
				want := concat(head(f), ds[:k], []string{"malformed: " + bad}, ds[k:], tail(f, "stop"))
				if got := labels(evs); !slices.Equal(got, want) {
					t.Errorf("events\n got %q\nwant %q", got, want)
				}
			})
		}
	}
}

func TestStreamNoSentinel(t *testing.T) {
	for _, f := range formats {
		t.Run(f.String(), func(t *testing.T) {
			s := fake.New()
			s.Script("m", fake.Answer("").Chunks("a", "b").NoSentinel())
			resp := openStream(t, context.Background(), s.Client(), s.URL(), f, "m")
			defer resp.Body.Close()
			evs, err := readEvents(resp.Body, time.Now())
			if err != io.EOF {
				t.Fatalf("read: %v (want a clean end)", err)
			}
			full := tail(f, "stop")
			want := concat(head(f), deltas(f, "a", "b"), full[:len(full)-1])
			if got := labels(evs); !slices.Equal(got, want) {
				t.Errorf("events\n got %q\nwant %q", got, want)
			}
		})
	}
}
