package anthropicsdk

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"go.uber.org/goleak"

	"github.com/backstop-llm/backstop/llm"
	native "github.com/backstop-llm/backstop/provider/anthropic"
)

// TestMain checks that no test leaves a goroutine behind, but the one
// go.opencensus.io starts in its init (a dependency of the SDK's vertex
// package, through google.golang.org/api), which runs for the process.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// testKey is the API key every test client sends; no error or answer may
// quote it.
const testKey = "sk-ant-api03-test-key-0123456789abcdef"

// okBody is a whole answer of one text block.
const okBody = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test-20260101",
"content":[{"type":"text","text":"Hello"},{"type":"text","text":", world"}],
"stop_reason":"end_turn","stop_sequence":null,
"usage":{"input_tokens":10,"cache_creation_input_tokens":3,"cache_read_input_tokens":7,"output_tokens":5}}`

var userReq = llm.Request{Model: "claude-test", Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}}

// transport returns an HTTP client of its own, its idle connections closed
// when t ends (goleak).
func httpClient(t testing.TB) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// newClient returns an SDK client of the Anthropic API at url that would
// retry five times, were the provider not to switch its retries off. Its
// HTTP client is the provider's (Config.HTTPClient).
func newClient(t testing.TB, url string, extra ...option.RequestOption) anthropic.Client {
	t.Helper()
	opts := []option.RequestOption{option.WithAPIKey(testKey), option.WithBaseURL(url), option.WithMaxRetries(5)}
	return anthropic.NewClient(append(opts, extra...)...)
}

func newProvider(t testing.TB, url string, extra ...option.RequestOption) *Provider {
	t.Helper()
	p, err := New(newClient(t, url, extra...), Config{HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// nativeProvider returns the native adapter at url, the reference this
// adapter must behave like.
func nativeProvider(t testing.TB, url string) *native.Provider {
	t.Helper()
	p, err := native.New(native.Config{APIKey: testKey, BaseURL: url, HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// canonical returns b re-marshalled with sorted keys.
func canonical(t testing.TB, b []byte) string {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// clientOf returns a client sending through rt.
func clientOf(rt http.RoundTripper) *http.Client {
	return &http.Client{Transport: rt}
}
