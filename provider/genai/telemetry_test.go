package genai

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
)

// TestCredentialsNeverRecorded runs a call and a stream through a chain
// whose first target fails (an upstream echoing every request header into
// its error message and request id) and whose second answers (echoing
// them into the answer's id, model and request id), logged by observe.Log,
// traced, and remembered by LastGood in Redis: no credential the requests
// carried appears in any span, log record, Result.Served or stored answer.
func TestCredentialsNeverRecorded(t *testing.T) {
	quietLog(t)
	for _, pl := range platforms {
		t.Run(pl.name, func(t *testing.T) {
			e := &echo{}
			srv := suite.ServeOn(t, "127.0.0.1:0", nil, e.handler(func(r *http.Request) string {
				if strings.Contains(r.URL.Path, "gemini-2.5-pro") {
					return "error"
				}
				return "ok"
			}))
			p := newProvider(t, pl.client(t, srv.URL, false), Config{})

			tel := oteltest.New()
			var logs lockedBuffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			m := miniredis.RunT(t)
			rc := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { rc.Close() })
			store, err := redisstore.NewCache(rc, redisstore.CacheConfig{})
			if err != nil {
				t.Fatal(err)
			}
			c, err := chain.New("secrets").TracerProvider(tel.TracerProvider).Observe(observe.Log(logger)).
				Primary(chain.Target{Name: "pro", Provider: p, Model: "gemini-2.5-pro", Retry: retry.Policy{MaxAttempts: 1}}).
				OrSibling(chain.Target{Name: "flash", Provider: p, Model: "gemini-2.5-flash"}).
				OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			ctx := context.Background()
			texts := map[string]string{}

			res, err := c.Call(ctx, hello("x"))
			if err != nil {
				t.Fatal(err)
			}
			if res.Served.Target != "flash" || len(res.Attempts) != 2 {
				t.Fatalf("served %+v after %d attempts; want flash after the failing pro", res.Served, len(res.Attempts))
			}
			texts["Result.Served"] = fmt.Sprintf("%+v", res.Served)
			texts["Result.Attempts"] = fmt.Sprintf("%+v", res.Attempts)

			st := c.Stream(ctx, hello("x"))
			sres, err := st.Result()
			if err != nil {
				t.Fatal(err)
			}
			texts["stream Result.Served"] = fmt.Sprintf("%+v", sres.Served)
			texts["stream Result.Attempts"] = fmt.Sprintf("%+v", sres.Attempts)

			if err := c.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			keys := m.Keys()
			if len(keys) == 0 {
				t.Fatal("LastGood stored nothing")
			}
			for _, k := range keys {
				v, err := m.Get(k)
				if err != nil {
					t.Fatal(err)
				}
				texts["redis "+k] = k + " " + v
			}
			spans := tel.Spans.GetSpans()
			if len(spans) == 0 {
				t.Fatal("no span")
			}
			for i, s := range spans {
				var b strings.Builder
				fmt.Fprintf(&b, "%s %v %q", s.Name, s.Status.Code, s.Status.Description)
				for _, kv := range s.Attributes {
					fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.Emit())
				}
				for _, ev := range s.Events {
					fmt.Fprintf(&b, " event %s", ev.Name)
					for _, kv := range ev.Attributes {
						fmt.Fprintf(&b, " %s=%s", kv.Key, kv.Value.Emit())
					}
				}
				texts[fmt.Sprintf("span %d", i)] = b.String()
			}
			texts["logs"] = logs.String()
			if !strings.Contains(texts["logs"], "req-") {
				t.Errorf("the logs carry no request id: %s", texts["logs"])
			}

			creds := e.credentials()
			if len(creds) == 0 {
				t.Fatal("the requests carried no credential")
			}
			for _, l := range leaks(creds, texts) {
				t.Error(l)
			}
		})
	}
}

// TestNewRebuildsOverAGuardedClient: New sends through a client of its own
// built from the caller's configuration, without detecting credentials or
// touching the network, and leaves the caller's client and HTTP client as
// they were.
func TestNewRebuildsOverAGuardedClient(t *testing.T) {
	// Credential detection would read this and fail.
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/credentials.json")
	for _, pl := range platforms {
		t.Run(pl.name, func(t *testing.T) {
			e := &echo{}
			srv := suite.ServeOn(t, "127.0.0.1:0", nil, e.handler(func(*http.Request) string { return "ok" }))
			c := pl.client(t, srv.URL, true)
			before := c.ClientConfig()
			hc := before.HTTPClient
			saved := *hc
			p := newProvider(t, c, Config{})
			if n := len(e.credentials()); n != 0 {
				t.Fatalf("New sent %d requests", n)
			}
			if _, err := p.Complete(context.Background(), hello("gemini-2.5-flash")); err != nil {
				t.Fatal(err)
			}
			after := c.ClientConfig()
			if after.HTTPClient != hc || hc.Transport != saved.Transport || hc.CheckRedirect == nil || hc.Jar != saved.Jar || hc.Timeout != saved.Timeout {
				t.Errorf("the caller's HTTP client changed: %+v, was %+v", *hc, saved)
			}
			if after.APIKey != before.APIKey || after.Location != before.Location || after.Project != before.Project ||
				after.HTTPOptions.BaseURL != before.HTTPOptions.BaseURL {
				t.Errorf("the caller's configuration changed: %+v", after)
			}
		})
	}
}
