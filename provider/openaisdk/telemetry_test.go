package openaisdk

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/tracing"
	"github.com/redis/go-redis/v9"
)

// TestEchoedCredentialsStayOutOfTelemetry: a chain whose primary fails
// with an error echoing the credentials and whose fallback answers with
// metadata echoing them, called and streamed with a slog logger, tracing
// to memory and LastGood in Redis: no span (attributes, status, events),
// no log record, no Served and no remembered answer holds a credential.
func TestEchoedCredentialsStayOutOfTelemetry(t *testing.T) {
	for _, pl := range platforms {
		for _, api := range apis {
			name := pl.name + "/" + api
			var c echoes
			failing := httptest.NewServer(echo(&c, api, echoMode(t, "server error")))
			defer failing.Close()
			answering := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				mode := "answer"
				if bytes.Contains(body, []byte(`"stream":true`)) {
					mode = "answer/stream"
				}
				echo(&c, api, echoMode(t, mode))(w, r)
			}))
			defer answering.Close()

			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			tel := oteltest.New()
			tr, err := tracing.New(tracing.Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider})
			if err != nil {
				t.Fatal(err)
			}
			m := miniredis.RunT(t)
			rc := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			defer rc.Close()
			store, err := redisstore.NewCache(rc, redisstore.CacheConfig{})
			if err != nil {
				t.Fatal(err)
			}
			ch, err := chain.New("support").Observe(observe.Log(logger), tr).
				Primary(chain.Target{Name: "primary", Provider: pl.new(t, failing.URL, api, 0, nil), Model: "gpt-4o",
					Retry: retry.Policy{MaxAttempts: 1}}).
				OrDeployment(chain.Target{Name: "backup", Provider: pl.new(t, answering.URL, api, 0, nil), Model: "gpt-4o",
					Retry: retry.Policy{MaxAttempts: 1}}).
				OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
				Build()
			if err != nil {
				t.Fatal(err)
			}

			var texts []string
			res, err := ch.Call(context.Background(), hello())
			if err != nil {
				t.Fatalf("%s: Call: %v", name, err)
			}
			if res.Served.Target != "backup" || res.Text != "Hi" || len(res.Attempts) != 2 {
				t.Fatalf("%s: served %+v, %d attempts: %+v", name, res.Served, len(res.Attempts), res)
			}
			texts = append(texts, fmt.Sprintf("%+v", res.Served), fmt.Sprintf("%+v", res.Attempts))
			texts = append(texts, answerTexts(res.Response)...)
			for _, a := range res.Attempts {
				texts = append(texts, errorTexts(a.Err)...)
			}
			st := ch.Stream(context.Background(), hello())
			for _, err := range st.Chunks() {
				if err != nil {
					t.Fatalf("%s: Stream: %v", name, err)
				}
			}
			sres, err := st.Result()
			if err != nil || sres.Served.Target != "backup" || sres.Text != "Hi" {
				t.Fatalf("%s: streamed %+v %v", name, sres, err)
			}
			texts = append(texts, fmt.Sprintf("%+v", sres.Served), fmt.Sprintf("%+v", sres.Attempts))
			texts = append(texts, answerTexts(sres.Response)...)
			for _, a := range sres.Attempts {
				texts = append(texts, errorTexts(a.Err)...)
			}
			if err := ch.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}

			texts = append(texts, logs.String())
			spans := tel.Spans.GetSpans()
			if len(spans) == 0 {
				t.Fatalf("%s: no span", name)
			}
			for _, s := range spans {
				texts = append(texts, s.Name, s.Status.Description)
				for _, a := range s.Attributes {
					texts = append(texts, a.Value.Emit())
				}
				for _, ev := range s.Events {
					texts = append(texts, ev.Name)
					for _, a := range ev.Attributes {
						texts = append(texts, a.Value.Emit())
					}
				}
			}
			keys := m.Keys()
			if len(keys) == 0 {
				t.Errorf("%s: LastGood stored nothing", name)
			}
			for _, k := range keys {
				v, err := m.Get(k)
				if err != nil {
					t.Fatal(err)
				}
				texts = append(texts, k, v)
			}
			if len(c.list()) == 0 {
				t.Fatalf("%s: the servers saw no credential", name)
			}
			c.leaks(t, name, texts...)
			if !bytes.Contains(logs.Bytes(), []byte("[redacted]")) {
				t.Errorf("%s: the logs hold no redacted echo: the test did not reach them\n%s", name, logs.String())
			}
		}
	}
}

// echoMode returns the echoing answer named name.
func echoMode(t testing.TB, name string) func(w http.ResponseWriter, api, e string) {
	for _, m := range echoModes {
		if m.name == name {
			return m.serve
		}
	}
	t.Fatalf("no echo mode %q", name)
	return nil
}
