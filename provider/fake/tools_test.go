package fake_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/provider/fake"
)

var weather = fake.ToolCall{Name: "get_weather", Arguments: `{"city": "Paris"}`}

func TestCallToolsBody(t *testing.T) {
	s := fake.New()
	s.Script("m", fake.CallTools(weather, fake.ToolCall{ID: "mine", Name: "get_time"}),
		fake.Answer("Let me check.").ToolCalls(weather))
	c := s.Client()

	r := call(t, c, s.URL(), fake.Anthropic, "m")
	want := `"content":[{"type":"tool_use","id":"toolu_fake_1_0","name":"get_weather","input":{"city":"Paris"},"caller":{"type":"direct"}},` +
		`{"type":"tool_use","id":"mine","name":"get_time","input":{},"caller":{"type":"direct"}}],"stop_reason":"tool_use",`
	if !strings.Contains(r.body, want) {
		t.Errorf("anthropic tool calls:\n got %s\nwant …%s…", r.body, want)
	}
	r = call(t, c, s.URL(), fake.OpenAI, "m")
	want = `"message":{"role":"assistant","content":"Let me check.","refusal":null,"tool_calls":[{"id":"call_fake_2_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}],"annotations":[]},"logprobs":null,"finish_reason":"tool_calls"}`
	if !strings.Contains(r.body, want) {
		t.Errorf("openai text and tool call:\n got %s\nwant …%s…", r.body, want)
	}

	s.Script("n", fake.CallTools(weather))
	r = call(t, c, s.URL(), fake.OpenAI, "n")
	if !strings.Contains(r.body, `"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_fake_3_0"`) {
		t.Errorf("openai tool call alone: %s", r.body)
	}
	r = call(t, c, s.URL(), fake.Anthropic, "n")
	if !strings.Contains(r.body, `"content":[{"type":"text","text":"","citations":null},`) && !strings.Contains(r.body, `"content":[{"type":"tool_use"`) {
		t.Errorf("anthropic tool call alone: %s", r.body)
	}
	// Finish overrides the tool-call default.
	s.Script("f", fake.CallTools(weather).Finish("max_tokens"))
	if r := call(t, c, s.URL(), fake.Anthropic, "f"); !strings.Contains(r.body, `"stop_reason":"max_tokens"`) {
		t.Errorf("Finish ignored: %s", r.body)
	}
}

func TestCallToolsPanicsOnBadArguments(t *testing.T) {
	for _, args := range []string{`not json`, `[1]`, `"s"`, `null`} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Arguments %s: no panic", args)
				}
			}()
			fake.CallTools(fake.ToolCall{Name: "f", Arguments: args})
		}()
	}
}

// streamData returns the data of each event of a streamed response.
func streamData(t *testing.T, c *http.Client, base string, f fake.Format, body string) []string {
	t.Helper()
	_, raw, err := readStream(t, c, newRequest(t, context.Background(), base, f, body))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

func TestCallToolsStreamAnthropic(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script("m", fake.Answer("On it.").ToolCalls(weather, fake.ToolCall{Name: "get_time"}))
		evs := streamData(t, c, base, fake.Anthropic, streamBody(fake.Anthropic, "m", false))
		var types []string
		var args [2]string
		for _, e := range evs {
			var v struct {
				Type         string
				Index        int
				ContentBlock struct{ Type, ID, Name string } `json:"content_block"`
				Delta        struct {
					Type        string
					Text        string
					PartialJSON string `json:"partial_json"`
					StopReason  string `json:"stop_reason"`
				}
			}
			if err := json.Unmarshal([]byte(e), &v); err != nil {
				t.Fatal(err)
			}
			label := v.Type
			switch {
			case v.Type == "content_block_start":
				label += ":" + v.ContentBlock.Type + ":" + v.ContentBlock.ID + ":" + v.ContentBlock.Name
			case v.Delta.Type == "input_json_delta":
				label = "json"
				args[v.Index-1] += v.Delta.PartialJSON
			case v.Type == "message_delta":
				label += ":" + v.Delta.StopReason
			}
			if len(types) == 0 || types[len(types)-1] != label || label != "json" {
				types = append(types, label)
			}
		}
		want := []string{"message_start", "content_block_start:text::", "ping", "content_block_delta", "content_block_delta",
			"content_block_stop", "content_block_start:tool_use:toolu_fake_1_0:get_weather", "json", "content_block_stop",
			"content_block_start:tool_use:toolu_fake_1_1:get_time", "json", "content_block_stop", "message_delta:tool_use", "message_stop"}
		if strings.Join(types, " ") != strings.Join(want, " ") {
			t.Errorf("events\n got %v\nwant %v", types, want)
		}
		if args[0] != `{"city":"Paris"}` || args[1] != `{}` {
			t.Errorf("arguments %q", args)
		}
		// The arguments come in several pieces, the first one empty.
		n := strings.Count(strings.Join(evs, "\n"), `"input_json_delta"`)
		if n < 4 {
			t.Errorf("%d input_json_delta events, want the arguments in several pieces", n)
		}
		if !strings.Contains(strings.Join(evs, "\n"), `"partial_json":""}`) {
			t.Error("no empty first partial_json")
		}
	})
}

func TestCallToolsStreamAnthropicAlone(t *testing.T) {
	s := fake.New()
	s.Script("m", fake.CallTools(weather))
	evs := streamData(t, s.Client(), s.URL(), fake.Anthropic, streamBody(fake.Anthropic, "m", false))
	if !strings.HasPrefix(evs[1], `{"type":"ping"}`) || !strings.HasPrefix(evs[2], `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use"`) {
		t.Errorf("a tool call alone has no text block: %v", evs[:3])
	}
}

func TestCallToolsStreamOpenAI(t *testing.T) {
	forEachMode(t, func(t *testing.T, s *fake.Server, c *http.Client, base string) {
		s.Script("m", fake.CallTools(weather, fake.ToolCall{Name: "get_time", Arguments: `{"tz":"UTC"}`}))
		evs := streamData(t, c, base, fake.OpenAI, streamBody(fake.OpenAI, "m", true))
		type call struct{ id, name, args string }
		var calls []call
		var finish string
		var head string
		for i, e := range evs {
			if e == "[DONE]" {
				continue
			}
			var v struct {
				Choices []struct {
					Delta struct {
						Content   *string
						ToolCalls []struct {
							Index    int
							ID       string
							Type     string
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					}
					FinishReason *string `json:"finish_reason"`
				}
			}
			if err := json.Unmarshal([]byte(e), &v); err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				head = e
			}
			for _, ch := range v.Choices {
				for _, tc := range ch.Delta.ToolCalls {
					for len(calls) <= tc.Index {
						calls = append(calls, call{})
					}
					if tc.ID != "" {
						calls[tc.Index].id, calls[tc.Index].name = tc.ID, tc.Function.Name
						if tc.Type != "function" {
							t.Errorf("type %q", tc.Type)
						}
					}
					calls[tc.Index].args += tc.Function.Arguments
				}
				if ch.FinishReason != nil {
					finish = *ch.FinishReason
				}
			}
		}
		if !strings.Contains(head, `"delta":{"role":"assistant","content":null,"refusal":null}`) {
			t.Errorf("head %s", head)
		}
		want := []call{{"call_fake_1_0", "get_weather", `{"city":"Paris"}`}, {"call_fake_1_1", "get_time", `{"tz":"UTC"}`}}
		if len(calls) != 2 || calls[0] != want[0] || calls[1] != want[1] || finish != "tool_calls" {
			t.Errorf("calls %+v finish %q", calls, finish)
		}
		if n := strings.Count(strings.Join(evs, "\n"), `"arguments"`); n < 6 {
			t.Errorf("%d argument deltas, want several per call", n)
		}
	})
}

func TestRefusal(t *testing.T) {
	s := fake.New()
	s.Script("m", fake.Refusal("I can't help with that."))
	c := s.Client()
	r := call(t, c, s.URL(), fake.OpenAI, "m")
	if !strings.Contains(r.body, `"message":{"role":"assistant","content":null,"refusal":"I can't help with that.","annotations":[]},"logprobs":null,"finish_reason":"stop"}`) {
		t.Errorf("openai refusal: %s", r.body)
	}
	r = call(t, c, s.URL(), fake.Anthropic, "m")
	if !strings.Contains(r.body, `"stop_reason":"refusal","stop_sequence":null,"stop_details":{"type":"refusal","category":null,"explanation":null}`) {
		t.Errorf("anthropic refusal: %s", r.body)
	}
	evs := strings.Join(streamData(t, c, s.URL(), fake.OpenAI, streamBody(fake.OpenAI, "m", false)), "\n")
	if !strings.Contains(evs, `"delta":{"refusal":"I"}`) || strings.Contains(evs, `"content":"I"`) ||
		!strings.Contains(evs, `"delta":{"role":"assistant","content":null,"refusal":""}`) {
		t.Errorf("openai streamed refusal:\n%s", evs)
	}
}

func TestCachedAndChoices(t *testing.T) {
	s := fake.New()
	s.Script("m", fake.Answer("hi").Usage(100, 2).Cached(60).CacheWrite(30))
	c := s.Client()
	r := call(t, c, s.URL(), fake.OpenAI, "m")
	if !strings.Contains(r.body, `"usage":{"prompt_tokens":100,"completion_tokens":2,"total_tokens":102,`+openaiUsageDetails(60)+`}`) {
		t.Errorf("openai cached: %s", r.body)
	}
	r = call(t, c, s.URL(), fake.Anthropic, "m")
	if !strings.Contains(r.body, `"usage":{"input_tokens":10,"cache_creation_input_tokens":30,"cache_read_input_tokens":60,"cache_creation":{"ephemeral_5m_input_tokens":30,`) {
		t.Errorf("anthropic cached: %s", r.body)
	}

	body := oBody(`[{"role":"user","content":"hi"}]`, `"n":2`)
	r = do(t, c, newRequest(t, context.Background(), s.URL(), fake.OpenAI, body))
	var v struct {
		Choices []struct {
			Index   int
			Message struct{ Content string }
		}
	}
	if err := json.Unmarshal([]byte(r.body), &v); err != nil || len(v.Choices) != 2 || v.Choices[1].Index != 1 || v.Choices[1].Message.Content != "hi" {
		t.Errorf("n=2: %s", r.body)
	}
	body = oBody(`[{"role":"user","content":"hi"}]`, `"n":2,"stream":true`)
	evs := strings.Join(streamData(t, c, s.URL(), fake.OpenAI, body), "\n")
	if strings.Count(evs, `"index":1,"delta":{"content":"hi"}`) != 1 || strings.Count(evs, `"index":0,"delta":{"content":"hi"}`) != 1 {
		t.Errorf("n=2 stream:\n%s", evs)
	}
}

func TestRateLimitHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fake.New()
		c := s.Client()
		// The defaults.
		r := call(t, c, s.URL(), fake.Anthropic, "d")
		checkHeaders(t, r.header, map[string]string{
			"Anthropic-Ratelimit-Requests-Limit": "4000", "Anthropic-Ratelimit-Requests-Remaining": "3999",
			"Anthropic-Ratelimit-Input-Tokens-Limit": "2000000", "Anthropic-Ratelimit-Output-Tokens-Limit": "400000",
			"Anthropic-Ratelimit-Tokens-Limit": "2400000",
		})
		r = call(t, c, s.URL(), fake.OpenAI, "d")
		checkHeaders(t, r.header, map[string]string{
			"X-Ratelimit-Limit-Requests": "4000", "X-Ratelimit-Remaining-Requests": "3998", "X-Ratelimit-Limit-Tokens": "2400000",
		})

		s.RateLimits("m", fake.Limits{Requests: 60, InputTokens: 6000, OutputTokens: 600})
		s.Script("m", fake.Answer("x").Usage(100, 10), fake.Answer("x").Usage(100, 10), fake.RateLimited("1"))
		start := time.Now()
		r = call(t, c, s.URL(), fake.Anthropic, "m")
		reset := start.Add(time.Second).UTC().Format(time.RFC3339) // 1 of 60 requests refills in 1 s
		checkHeaders(t, r.header, map[string]string{
			"Anthropic-Ratelimit-Requests-Limit": "60", "Anthropic-Ratelimit-Requests-Remaining": "59",
			"Anthropic-Ratelimit-Requests-Reset":     reset,
			"Anthropic-Ratelimit-Input-Tokens-Limit": "6000", "Anthropic-Ratelimit-Input-Tokens-Remaining": "5900",
			"Anthropic-Ratelimit-Input-Tokens-Reset":  reset,
			"Anthropic-Ratelimit-Output-Tokens-Limit": "600", "Anthropic-Ratelimit-Output-Tokens-Remaining": "590",
			"Anthropic-Ratelimit-Tokens-Limit": "6600", "Anthropic-Ratelimit-Tokens-Remaining": "6490",
			"Anthropic-Ratelimit-Tokens-Reset": reset,
		})
		r = call(t, c, s.URL(), fake.OpenAI, "m")
		checkHeaders(t, r.header, map[string]string{
			"X-Ratelimit-Limit-Requests": "60", "X-Ratelimit-Remaining-Requests": "58", "X-Ratelimit-Reset-Requests": "2s",
			"X-Ratelimit-Limit-Tokens": "6600", "X-Ratelimit-Remaining-Tokens": "6380", "X-Ratelimit-Reset-Tokens": "2s",
		})
		// A scripted error takes a request and its input tokens.
		r = call(t, c, s.URL(), fake.OpenAI, "m")
		if r.status != 429 || r.header.Get("X-Ratelimit-Remaining-Requests") != "57" {
			t.Errorf("429: %d remaining %q", r.status, r.header.Get("X-Ratelimit-Remaining-Requests"))
		}
		// The buckets refill on the fake's clock: after 30 s, half a minute's worth.
		time.Sleep(30 * time.Second)
		r = call(t, c, s.URL(), fake.OpenAI, "m")
		if got := r.header.Get("X-Ratelimit-Remaining-Requests"); got != "59" {
			t.Errorf("after 30 s remaining %q, want 59 (full, less this request)", got)
		}
		// Remaining counts stop at 0.
		s.RateLimits("m", fake.Limits{Requests: 1, InputTokens: 1, OutputTokens: 1})
		for range 2 {
			r = call(t, c, s.URL(), fake.Anthropic, "m")
		}
		checkHeaders(t, r.header, map[string]string{
			"Anthropic-Ratelimit-Requests-Remaining": "0", "Anthropic-Ratelimit-Input-Tokens-Remaining": "0",
			"Anthropic-Ratelimit-Requests-Reset": time.Now().Add(time.Minute).UTC().Format(time.RFC3339),
		})
		// The zero Limits turns the headers off; an outcome's Header wins.
		s.RateLimits("m", fake.Limits{})
		if r = call(t, c, s.URL(), fake.Anthropic, "m"); r.header.Get("Anthropic-Ratelimit-Requests-Limit") != "" {
			t.Errorf("headers not off: %v", r.header)
		}
		s.RateLimits("", fake.Limits{})
		if r = call(t, c, s.URL(), fake.OpenAI, "other"); r.header.Get("X-Ratelimit-Limit-Requests") != "" {
			t.Errorf("default headers not off: %v", r.header)
		}
		s.RateLimits("", fake.Limits{Requests: 5, InputTokens: 5, OutputTokens: 5})
		s.Script("h", fake.Answer("x").Header("X-Ratelimit-Remaining-Requests", "0"))
		if r = call(t, c, s.URL(), fake.OpenAI, "h"); r.header.Get("X-Ratelimit-Remaining-Requests") != "0" || r.header.Get("X-Ratelimit-Limit-Requests") != "5" {
			t.Errorf("override: %v", r.header)
		}
		// Streams carry them too.
		resp, err := c.Do(newRequest(t, context.Background(), s.URL(), fake.OpenAI, streamBody(fake.OpenAI, "s", false)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("X-Ratelimit-Remaining-Requests") != "4" {
			t.Errorf("stream headers %v", resp.Header)
		}
	})
}
