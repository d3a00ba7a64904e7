package openaisdk

// The adapter against an upstream that attacks it: bodies and streams
// that never end, answers and errors that echo the credentials back,
// redirects to another host. Every test runs on each platform the adapter
// supports (OpenAI, Azure with an api-key, Azure with a token credential)
// and on both APIs.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
)

// The credentials the hostile tests' clients carry. The Provider is never
// told of them (Config.APIKey is empty): it must learn them from the
// requests.
const (
	openaiSecret = "sk-proj-hostile-0123456789abcdefghij"
	azureSecret  = "azure-hostile-key-0123456789abcdef"
	azureToken   = "eyJ0eXAiOiJKV1Qi-hostile-token-0123456789"
)

// tokenCredential is an Azure identity handing out azureToken.
type tokenCredential struct{}

func (tokenCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: azureToken, ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// platform builds a Provider on one of the adapter's platforms.
type platform struct {
	name string
	// new returns a Provider calling the server at url with api, its
	// MaxResponseBytes max, through client (the SDK's default when nil),
	// over a client set to retry 5 times. Config.APIKey is empty.
	new func(t testing.TB, url, api string, max int64, client *http.Client) *Provider
}

var platforms = []platform{
	{"openai", func(t testing.TB, url, api string, max int64, client *http.Client) *Provider {
		return build(t, client, Config{API: api, MaxResponseBytes: max},
			option.WithAPIKey(openaiSecret), option.WithBaseURL(url+"/v1"))
	}},
	{"azure-key", func(t testing.TB, url, api string, max int64, client *http.Client) *Provider {
		return build(t, client, Config{API: api, Platform: PlatformAzure, MaxResponseBytes: max},
			azure.WithEndpoint(url, "2024-10-21"), azure.WithAPIKey(azureSecret), azure.WithUnsafeAllowHTTP())
	}},
	{"azure-token", func(t testing.TB, url, api string, max int64, client *http.Client) *Provider {
		return build(t, client, Config{API: api, Platform: PlatformAzure, MaxResponseBytes: max},
			azure.WithEndpoint(url, "2024-10-21"), azure.WithTokenCredential(tokenCredential{}), azure.WithUnsafeAllowHTTP())
	}},
}

func build(t testing.TB, client *http.Client, o Config, opts ...option.RequestOption) *Provider {
	t.Helper()
	opts = append(opts, option.WithMaxRetries(5), option.WithMaxRetryDelay(time.Millisecond))
	if client != nil {
		opts = append(opts, option.WithHTTPClient(client))
	}
	p, err := New(openai.NewClient(opts...), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// try makes one attempt of p: Complete, or a Stream read to its end.
// It returns the answer (a stream's Response(), also when it failed) and
// the error.
func try(p *Provider, stream bool) (*llm.Response, error) {
	if !stream {
		return p.Complete(context.Background(), hello())
	}
	st, err := p.Stream(context.Background(), hello())
	if err != nil {
		return nil, err
	}
	defer st.Close()
	for {
		if _, err := st.Next(); err != nil {
			if err == io.EOF {
				err = nil
			}
			return st.Response(), err
		}
	}
}

func llmError(t testing.TB, err error) *llm.Error {
	t.Helper()
	var e *llm.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not an *llm.Error", err, err)
	}
	return e
}

// The memory tests: a server offers more than 64 MiB; the adapter, capped
// at 1 MiB, must fail the attempt having allocated far less.
const (
	testCap  = 1 << 20
	offered  = 72 << 20
	tooMuch  = 64 << 20
	pieceLen = 1 << 10
)

// flood is a hostile answer: head, then piece again and again until
// offered bytes are written or the client goes away.
type flood struct {
	status  int
	header  []string // name, value pairs
	head    string
	piece   string
	gzipped bool // the whole (head and pieces) gzip-compressed, Content-Encoding: gzip
}

// handler serves f, counting what it wrote in n.
func (f flood) handler(n *atomic.Int64) http.HandlerFunc {
	var compressed []byte
	if f.gzipped {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		io.WriteString(zw, f.head)
		piece := []byte(f.piece)
		for w := len(f.head); w < offered; w += len(piece) {
			zw.Write(piece)
		}
		zw.Close()
		compressed = b.Bytes()
	}
	head, piece := []byte(f.head), []byte(f.piece)
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(f.header); i += 2 {
			w.Header().Set(f.header[i], f.header[i+1])
		}
		if f.gzipped {
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(f.status)
			m, _ := w.Write(compressed)
			n.Add(int64(m))
			return
		}
		w.WriteHeader(f.status)
		m, err := w.Write(head)
		n.Add(int64(m))
		w.(http.Flusher).Flush()
		for written := m; err == nil && written < offered && r.Context().Err() == nil; written += m {
			m, err = w.Write(piece)
			n.Add(int64(m))
		}
	}
}

var (
	json200 = []string{"Content-Type", "application/json", "X-Request-Id", "req_flood"}
	sse200  = []string{"Content-Type", "text/event-stream", "X-Request-Id", "req_flood"}
	filler  = strings.Repeat("a", pieceLen)
)

// floods are the hostile answers of each API, and whether the attempt
// streams.
func floods(api string) map[string]struct {
	f      flood
	stream bool
} {
	type c = struct {
		f      flood
		stream bool
	}
	errorBody := flood{status: 500, header: json200, head: `{"error":{"message":"`, piece: filler}
	success := flood{status: 200, header: json200,
		head: `{"id":"c","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`, piece: filler}
	giant := flood{status: 200, header: sse200, head: "data: {\"x\":\"", piece: "data: " + filler + "\n"}
	text := flood{status: 200, header: sse200, head: ": hello\n\n",
		piece: "data: " + `{"id":"c","model":"m","choices":[{"index":0,"delta":{"content":"` + filler + `"}}]}` + "\n\n"}
	calls := flood{status: 200, header: sse200, head: ": hello\n\n",
		piece: "data: " + `{"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"` + filler + `"}}]}}]}` + "\n\n"}
	if api == APIResponses {
		success.head = `{"id":"r","object":"response","status":"completed","model":"m","output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"`
		giant.head = "event: response.output_text.delta\ndata: {\"x\":\""
		text.piece = responseEvent("response.output_text.delta", `"item_id":"m","output_index":0,"content_index":0,"delta":"`+filler+`"`)
		calls.head = responseEvent("response.output_item.added", `"output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"","status":"in_progress"}`)
		calls.piece = responseEvent("response.function_call_arguments.delta", `"item_id":"fc_1","output_index":0,"delta":"`+filler+`"`)
	}
	gzError, gzSuccess, gzGiant := errorBody, success, giant
	gzError.gzipped, gzSuccess.gzipped, gzGiant.gzipped = true, true, true
	return map[string]c{
		"error body":             {errorBody, false},
		"error body/stream":      {errorBody, true},
		"success body":           {success, false},
		"success body/stream":    {success, true},
		"gzip error body":        {gzError, false},
		"gzip success body":      {gzSuccess, false},
		"gzip event":             {gzGiant, true},
		"one giant event":        {giant, true},
		"endless text deltas":    {text, true},
		"endless tool arguments": {calls, true},
	}
}

// TestMemoryIsCapped: a body, a compressed body, an event, the text or the
// tool calls of a stream, each offered past 64 MiB, fail the attempt with
// a classified error, the adapter (and the SDK under it) having allocated
// less than 64 MiB in all: every byte goes through MaxResponseBytes.
func TestMemoryIsCapped(t *testing.T) {
	for _, pl := range platforms {
		for _, api := range apis {
			for name, c := range floods(api) {
				name := pl.name + "/" + api + "/" + name
				var written atomic.Int64
				s := httptest.NewServer(c.f.handler(&written))
				p := pl.new(t, s.URL, api, testCap, nil)

				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				res, err := try(p, c.stream)
				runtime.ReadMemStats(&after)
				s.Close()

				grew := after.TotalAlloc - before.TotalAlloc
				if grew >= tooMuch {
					t.Errorf("%s: the attempt allocated %d MiB; want less than %d", name, grew>>20, tooMuch>>20)
				}
				if err == nil {
					t.Errorf("%s: the attempt succeeded (%d bytes of text); want it cut at the cap", name, len(res.Text))
					continue
				}
				e := llmError(t, err)
				if e.Kind == llm.KindUnknown || e.Status != c.f.status || e.Provider != p.Name() {
					t.Errorf("%s: %#v; want a classified error with status %d", name, e, c.f.status)
				}
				if !c.f.gzipped && written.Load() >= tooMuch {
					t.Errorf("%s: the server wrote %d MiB: the client read on past the cap", name, written.Load()>>20)
				}
			}
		}
	}
}

// TestMaxResponseBytes: the option is checked, and an answer within the
// cap passes.
func TestMaxResponseBytes(t *testing.T) {
	if _, err := New(openai.NewClient(option.WithAPIKey("k")), Config{MaxResponseBytes: -1}); err == nil ||
		!strings.Contains(err.Error(), "Config.MaxResponseBytes") {
		t.Errorf("a negative MaxResponseBytes: %v", err)
	}
	for _, api := range apis {
		body := map[string]string{APIChat: chatOK, APIResponses: responsesOK}[api]
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}))
		defer s.Close()
		for _, max := range []int64{int64(len(body)), int64(len(body)) - 1} {
			res, err := platforms[0].new(t, s.URL, api, max, nil).Complete(context.Background(), hello())
			if fits := max == int64(len(body)); fits != (err == nil) || fits && res.Text != "Hello!" {
				t.Errorf("%s, a body of %d bytes under a cap of %d: %+v %v", api, len(body), max, res, err)
			}
		}
	}
}

// echoes records the credentials the requests carried, as the server got
// them.
type echoes struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (c *echoes) add(r *http.Request) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	for _, v := range suite.CredentialsIn(r.Header) {
		c.seen[v] = true
	}
	var all []string
	for _, vs := range r.Header {
		all = append(all, vs...)
	}
	return strings.Join(all, " | ")
}

func (c *echoes) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for s := range c.seen {
		out = append(out, s)
	}
	return out
}

// leaks fails t for every credential of c that one of texts holds.
func (c *echoes) leaks(t testing.TB, where string, texts ...string) {
	t.Helper()
	for _, s := range c.list() {
		for _, text := range texts {
			if strings.Contains(text, s) {
				t.Errorf("%s: a credential (%.12s…) is in %q", where, s, text)
			}
		}
	}
}

// errorTexts is everything an error says: its text, %+v, each field, the
// text of each error it wraps.
func errorTexts(err error) []string {
	if err == nil {
		return nil
	}
	out := []string{err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%v", err)}
	var e *llm.Error
	if errors.As(err, &e) {
		out = append(out, e.Message, e.Detail, e.RequestID, e.Type, e.Code, e.Provider)
	}
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(u) {
		out = append(out, u.Error())
	}
	return out
}

func answerTexts(res *llm.Response) []string {
	if res == nil {
		return nil
	}
	return []string{res.ID, res.Model, res.RequestID, res.FinishReason, fmt.Sprintf("%+v", *res)}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// echoModes are the hostile answers that copy the request's header values
// (e) into what the adapter reads: an error, an answer, a stream, a stream
// that fails, a stream the cap cuts, a redirect, a body that is no JSON.
var echoModes = []struct {
	name   string
	stream bool
	serve  func(w http.ResponseWriter, api, e string)
}{
	{"error", false, func(w http.ResponseWriter, api, e string) {
		w.WriteHeader(400)
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"invalid_request_error","code":%s}}`, quote(e), quote(e))
	}},
	{"error/stream", true, func(w http.ResponseWriter, api, e string) {
		w.WriteHeader(429)
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"requests","code":%s}}`, quote(e), quote(e))
	}},
	{"server error", false, func(w http.ResponseWriter, api, e string) {
		w.WriteHeader(500)
		fmt.Fprintf(w, `{"error":{"message":%s,"type":"server_error","code":null}}`, quote(e))
	}},
	{"html", false, func(w http.ResponseWriter, api, e string) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(502)
		fmt.Fprintf(w, "<html>%s</html>", e)
	}},
	{"no JSON", false, func(w http.ResponseWriter, api, e string) {
		fmt.Fprintf(w, `{"id":%s,"choices":[{"index":0,"message":{"content":[%s]}}]`, quote(e), e)
	}},
	{"answer", false, func(w http.ResponseWriter, api, e string) {
		if api == APIResponses {
			fmt.Fprintf(w, `{"id":%s,"object":"response","status":"completed","model":%s,"output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hi"}]}]}`, quote(e), quote(e))
			return
		}
		fmt.Fprintf(w, `{"id":%s,"model":%s,"choices":[{"index":0,"finish_reason":%s,"message":{"role":"assistant","content":"Hi"}}]}`, quote(e), quote(e), quote(e))
	}},
	{"answer/stream", true, func(w http.ResponseWriter, api, e string) {
		w.Header().Set("Content-Type", "text/event-stream")
		if api == APIResponses {
			resp := fmt.Sprintf(`"response":{"id":%s,"object":"response","status":"%%s","model":%s,"output":[]}`, quote(e), quote(e))
			io.WriteString(w, responseEvent("response.created", fmt.Sprintf(resp, "in_progress"))+
				responseEvent("response.output_text.delta", `"item_id":"m","output_index":0,"content_index":0,"delta":"Hi"`)+
				responseEvent("response.completed", fmt.Sprintf(resp, "completed")))
			return
		}
		io.WriteString(w, strings.Join(events(
			fmt.Sprintf(`{"id":%s,"model":%s,"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, quote(e), quote(e)),
			fmt.Sprintf(`{"id":%s,"choices":[{"index":0,"delta":{},"finish_reason":%s}]}`, quote(e), quote(e)),
			"[DONE]"), ""))
	}},
	{"error event", true, func(w http.ResponseWriter, api, e string) {
		w.Header().Set("Content-Type", "text/event-stream")
		if api == APIResponses {
			io.WriteString(w, responseEvent("response.output_text.delta", `"item_id":"m","output_index":0,"content_index":0,"delta":"Hi"`)+
				responseEvent("error", fmt.Sprintf(`"code":%s,"message":%s`, quote(e), quote(e))))
			return
		}
		io.WriteString(w, strings.Join(events(`{"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			fmt.Sprintf(`{"error":{"message":%s,"type":"server_error","code":%s}}`, quote(e), quote(e))), ""))
	}},
	{"failed response", true, func(w http.ResponseWriter, api, e string) {
		w.Header().Set("Content-Type", "text/event-stream")
		if api == APIResponses {
			io.WriteString(w, responseEvent("response.failed", fmt.Sprintf(`"response":{"id":%s,"status":"failed","model":%s,"output":[],"error":{"code":%s,"message":%s}}`,
				quote(e), quote(e), quote(e), quote(e))))
			return
		}
		io.WriteString(w, strings.Join(events(fmt.Sprintf(`{"id":%s,"model":%s,"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, quote(e), quote(e))), ""))
	}},
	{"cut by the cap", true, func(w http.ResponseWriter, api, e string) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, strings.Join(events(fmt.Sprintf(`{"id":%s,"model":%s,"choices":[{"index":0,"delta":{"content":"Hi"}}]}`, quote(e), quote(e))), ""))
		io.WriteString(w, "data: "+strings.Repeat("x", 2*testCap)+"\n\n")
	}},
	{"redirect", false, func(w http.ResponseWriter, api, e string) {
		w.Header().Set("Location", "/elsewhere/"+strings.ReplaceAll(e, " ", "_"))
		w.WriteHeader(307)
	}},
}

// echo is an upstream that copies every value of every request header into
// its request-id headers, then answers as serve says with them.
func echo(c *echoes, api string, serve func(w http.ResponseWriter, api, e string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		e := c.add(r)
		for _, h := range []string{"X-Request-Id", "Apim-Request-Id", "Request-Id"} {
			w.Header().Set(h, e)
		}
		w.Header().Set("Content-Type", "application/json")
		serve(w, api, e)
	}
}

// TestEchoedCredentialsAreRedacted: whatever the upstream echoes of the
// credentials the request carried (the OpenAI key, the Azure api-key, the
// Azure identity's token, none of which the Provider was told of), no
// error, no answer and no stream's Response() holds them.
func TestEchoedCredentialsAreRedacted(t *testing.T) {
	for _, pl := range platforms {
		var c echoes
		for _, api := range apis {
			for _, m := range echoModes {
				name := pl.name + "/" + api + "/" + m.name
				s := httptest.NewServer(echo(&c, api, m.serve))
				res, err := try(pl.new(t, s.URL, api, testCap, nil), m.stream)
				s.Close()
				c.leaks(t, name+": error", errorTexts(err)...)
				c.leaks(t, name+": answer", answerTexts(res)...)
				id := ""
				if res != nil {
					id = res.RequestID
				}
				if e := (*llm.Error)(nil); errors.As(err, &e) {
					id = e.RequestID
				}
				// A client following a redirect on the same origin
				// (the Azure identity's pipeline gives it the means)
				// hands the adapter no response at all.
				followed := m.name == "redirect" && pl.name == "azure-token"
				if !strings.Contains(id, "[redacted]") && !followed {
					t.Errorf("%s: request id %q, err %v: the echo did not reach the adapter's output", name, id, err)
				}
			}
		}
		if len(c.list()) == 0 {
			t.Errorf("%s: the server saw no credential", pl.name)
		}
	}
}

// redirectClients are the HTTP clients the redirect tests give the SDK:
// none (the SDK's default, http.DefaultClient, which follows redirects),
// one following every redirect, one following none.
var redirectClients = []struct {
	name   string
	client *http.Client
}{
	{"SDK's client", nil},
	{"client following every redirect", &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}},
	{"client following no redirect", &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}},
}

// TestRedirectIsRefused: a provider URL that redirects to another host
// fails the attempt (KindNotFound, Code "redirect") and nothing reaches
// the other host, for every redirect status, streamed or not, on both
// APIs and every platform, whatever client the SDK was given; the
// provider's URL gets one request.
func TestRedirectIsRefused(t *testing.T) {
	var there atomic.Int64
	elsewhere := suite.ServeOn(t, "127.0.0.2:0", &there, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatOK)
	})
	for _, status := range []int{301, 302, 303, 307, 308} {
		var here atomic.Int64
		from := suite.ServeOn(t, "127.0.0.1:0", &here, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, elsewhere.URL+r.URL.RequestURI(), status)
		})
		for _, pl := range platforms {
			for _, api := range apis {
				for _, c := range redirectClients {
					for _, stream := range []bool{false, true} {
						name := fmt.Sprintf("%d/%s/%s/%s/stream=%v", status, pl.name, api, c.name, stream)
						before := here.Load()
						_, err := try(pl.new(t, from.URL, api, 0, c.client), stream)
						if got := here.Load() - before; got != 1 {
							t.Errorf("%s: the provider's URL got %d requests; want 1", name, got)
						}
						if err == nil {
							t.Errorf("%s: the attempt succeeded; want a refused redirect", name)
							continue
						}
						if e := llmError(t, err); e.Kind != llm.KindNotFound || e.Code != "redirect" {
							t.Errorf("%s: %#v; want not_found, code redirect", name, e)
						}
					}
				}
			}
		}
	}
	if n := there.Load(); n != 0 {
		t.Errorf("the other host got %d requests; want 0", n)
	}
}

// TestRedirectOnTheSameHost: a redirect to another path of the same host
// fails the attempt too. A client that follows it (the SDK's default
// does) sends the second request, bodiless (a 301, 302 or 303 turns the
// POST into a GET; a 307 or 308 is not followed, the adapter having taken
// the means to re-send the body): the adapter cannot stop what happens
// inside the client, but it does not take the answer.
func TestRedirectOnTheSameHost(t *testing.T) {
	for _, status := range []int{301, 302, 303, 307, 308} {
		var n, moved atomic.Int64
		s := suite.ServeOn(t, "127.0.0.1:0", &n, func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/moved") {
				moved.Add(1)
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, chatOK)
				return
			}
			http.Redirect(w, r, "/moved"+r.URL.RequestURI(), status)
		})
		for _, pl := range platforms {
			for _, api := range apis {
				for _, c := range redirectClients {
					for _, stream := range []bool{false, true} {
						name := fmt.Sprintf("%d/%s/%s/%s/stream=%v", status, pl.name, api, c.name, stream)
						before := moved.Load()
						_, err := try(pl.new(t, s.URL, api, 0, c.client), stream)
						// The Azure SDK's token pipeline sits below the
						// adapter's guard and gives its own request a body
						// it can re-send: a client that follows a 307 or
						// 308 takes it there (see the package
						// documentation).
						below := pl.name == "azure-token" && c.name != "client following no redirect"
						if got := moved.Load() - before; status >= 307 && got != 0 && !below {
							t.Errorf("%s: the redirect was followed; a body the client cannot re-send stops it", name)
						}
						if err == nil {
							t.Errorf("%s: the attempt succeeded; want a refused redirect", name)
							continue
						}
						if e := llmError(t, err); e.Kind != llm.KindNotFound || e.Code != "redirect" {
							t.Errorf("%s: %#v; want not_found, code redirect", name, e)
						}
					}
				}
			}
		}
	}
}

// failingCredential is an Azure identity whose token request fails, its
// error quoting what the identity endpoint answered.
type failingCredential struct{}

func (failingCredential) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{}, errors.New("the identity endpoint answered: " + marker)
}

// marker stands for the provider's own words (which may quote the
// prompt): they belong in Detail, never in Error(), Message or Err's text.
const marker = "PROVIDER-WORDS-QUOTING-THE-PROMPT"

// TestProviderTextOnlyInDetail: what a provider or an identity endpoint
// says reaches an error's Detail only, so that logs and span statuses,
// which use Error(), never carry it.
func TestProviderTextOnlyInDetail(t *testing.T) {
	check := func(name string, err error) {
		t.Helper()
		e := llmError(t, err)
		texts := []string{err.Error(), fmt.Sprintf("%+v", err), e.Message}
		if e.Err != nil {
			texts = append(texts, e.Err.Error())
		}
		for _, s := range texts {
			if strings.Contains(s, marker) {
				t.Errorf("%s: the provider's words are in %q", name, s)
			}
		}
		// The SDK keeps no event it could not decode: its complaint is
		// all there is to put in Detail.
		if !strings.Contains(e.Detail, marker) && !strings.Contains(name, "event no JSON") {
			t.Errorf("%s: Detail %q does not hold the provider's words", name, e.Detail)
		}
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a request was sent")
	}))
	defer s.Close()
	for _, api := range apis {
		p := build(t, nil, Config{API: api, Platform: PlatformAzure},
			azure.WithEndpoint(s.URL, "2024-10-21"), azure.WithTokenCredential(failingCredential{}), azure.WithUnsafeAllowHTTP())
		for _, stream := range []bool{false, true} {
			_, err := try(p, stream)
			check(fmt.Sprintf("%s/stream=%v: the identity fails", api, stream), err)
		}
	}
	for name, c := range map[string]struct {
		api    string
		stream bool
		serve  http.HandlerFunc
	}{
		"an error":      {APIChat, false, suite.Respond(400, `{"error":{"message":"`+marker+`","type":"invalid_request_error"}}`, "Content-Type", "application/json")},
		"a proxy page":  {APIChat, false, suite.Respond(502, "<html>"+marker+"</html>", "Content-Type", "text/html")},
		"a 200 no JSON": {APIResponses, false, suite.Respond(200, `{"id":"r","output":[`+marker, "Content-Type", "application/json")},
		"an event no JSON": {APIChat, true, suite.SSE(events(`{"id":"c","choices":[{"index":0,"delta":{"content":"Hi"}}]}`,
			`{"id":"c","choices":[{"index":0,"delta":{"content":`+marker+`}}]}`))},
		"an error event": {APIResponses, true, suite.SSE([]string{responseEvent("error", `"code":"server_error","message":"`+marker+`"`)})},
	} {
		srv := suite.NewServer(t, c.serve)
		_, err := try(newProvider(t, srv.URL, c.api), c.stream)
		check(name, err)
	}
}
