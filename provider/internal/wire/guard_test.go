package wire

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// roundTrip sends one POST to url through a fresh Exchange over client.
func roundTrip(t *testing.T, client *http.Client, url string, stream bool) (*Exchange, *http.Response, error) {
	t.Helper()
	ep := &Endpoint{Provider: "p", MaxBytes: 1 << 20, RequestID: "Request-Id"}
	x := ep.NewExchange(stream, false)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(`{"prompt":"secret prompt"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.GetBody = func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(`{"prompt":"secret prompt"}`)), nil
	}
	req.Header.Set("Authorization", "Bearer sk-learned-token-0123456789")
	res, err := x.Middleware(req, client.Do)
	return x, res, err
}

func TestExchangeRefusesRedirectsWhateverTheClient(t *testing.T) {
	var elsewhere atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		from := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/x", status)
		}))
		for _, c := range []*http.Client{{}, GuardedClient(nil)} {
			_, _, err := roundTrip(t, c, from.URL, false)
			if !errors.Is(err, ErrRefused) {
				t.Errorf("%d: err = %v; want ErrRefused", status, err)
			}
		}
		from.Close()
	}
	// A following client still sends 301-303 as a GET without a body; only
	// the guarded client sends nothing at all.
	elsewhere.Store(0)
	from := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", 307)
	}))
	defer from.Close()
	ep := &Endpoint{Provider: "p"}
	x := ep.NewExchange(false, false)
	req, _ := http.NewRequest(http.MethodPost, from.URL, strings.NewReader("body"))
	res, err := GuardedClient(&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return nil }}).Do(req.WithContext(WithExchange(context.Background(), x)))
	if err == nil {
		res.Body.Close()
	}
	if got := elsewhere.Load(); got != 0 {
		t.Errorf("the other host got %d requests through the guarded client; want 0", got)
	}
	if f := x.Failure(); f == nil || f.Kind != llm.KindNotFound || f.Code != "redirect" {
		t.Errorf("failure = %v; want a KindNotFound redirect", f)
	}
}

func TestExchangeRefusesASecondRequest(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { n.Add(1); io.WriteString(w, "{}") }))
	defer srv.Close()
	ep := &Endpoint{Provider: "p"}
	x := ep.NewExchange(false, false)
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		res, err := x.Middleware(req, http.DefaultClient.Do)
		if i == 0 && err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			res.Body.Close()
		}
		if i == 1 && !errors.Is(err, ErrRefused) {
			t.Fatalf("second request: err = %v; want ErrRefused", err)
		}
	}
	if n.Load() != 1 {
		t.Errorf("the server got %d requests; want 1", n.Load())
	}
}

// heapGrowth returns how many bytes f allocated.
func heapGrowth(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

func TestExchangeCapsBodies(t *testing.T) {
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zw.Write(make([]byte, 64<<20))
	zw.Close()
	cases := map[string]http.HandlerFunc{
		"endless error body": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(500)
			endlessBody(w, []byte("x"))
		},
		"endless success body": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			endlessBody(w, []byte(`{"a":"`))
		},
		"gzip bomb": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(bomb.Bytes())
		},
	}
	for name, h := range cases {
		srv := httptest.NewServer(h)
		var x *Exchange
		var err error
		grew := heapGrowth(func() {
			for _, client := range []*http.Client{GuardedClient(nil), {Transport: &http.Transport{DisableCompression: true}}} {
				x, _, err = roundTrip(t, client, srv.URL, false)
				if !errors.Is(err, ErrRefused) || x.Failure() == nil {
					t.Errorf("%s: err = %v, failure %v; want the cap's failure", name, err, x.Failure())
				}
			}
		})
		if grew > 32<<20 {
			t.Errorf("%s: %d MiB allocated; want under 32 MiB with a 1 MiB cap", name, grew>>20)
		}
		srv.Close()
	}
}

// endlessBody writes piece until the client goes away (at most 256 MiB).
func endlessBody(w http.ResponseWriter, first []byte) {
	w.Write(first)
	piece := bytes.Repeat([]byte("x"), 32<<10)
	for i := 0; i < 8192; i++ {
		if _, err := w.Write(piece); err != nil {
			return
		}
	}
}

func TestExchangeCapsOneStreamEvent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"ok\":1}\n\n")
		for i := 0; i < 64; i++ { // 64 lines of 1 MiB... one event
			w.Write(append([]byte("data: "), bytes.Repeat([]byte("y"), 1<<20)...))
			if _, err := io.WriteString(w, "\n"); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	{
		x, res, err := roundTrip(t, http.DefaultClient, srv.URL, true)
		if err != nil {
			t.Fatal(err)
		}
		n, rerr := io.Copy(io.Discard, res.Body)
		if !errors.Is(rerr, ErrRefused) {
			t.Errorf("read %d bytes, err %v; want ErrRefused", n, rerr)
		}
		if n > 1<<20+64 {
			t.Errorf("read %d bytes; want at most the cap", n)
		}
		if f := x.Failure(); f == nil || f.Kind != llm.KindServer {
			t.Errorf("failure = %v; want KindServer", f)
		}
	}
}

// frame is an AWS event-stream frame of n bytes in all: its total length,
// then filler without a newline (the Exchange reads only the lengths; the
// SSE limit would see one endless line).
func frame(n int) []byte {
	b := make([]byte, n)
	binary.BigEndian.PutUint32(b, uint32(n))
	for i := 4; i < n; i++ {
		b[i] = 'x'
	}
	return b
}

// TestExchangeCapsOneEventStreamFrame: an AWS event stream (Bedrock's) is
// limited per frame, by the length each frame starts with: frames under the
// cap pass whatever their total, one over it is refused before its payload
// is read.
func TestExchangeCapsOneEventStreamFrame(t *testing.T) {
	small := frame(64 << 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		for i := 0; i < 48; i++ { // 3 MiB of small frames: three times the cap
			w.Write(small)
		}
		if r.URL.Query().Get("big") != "" {
			w.Write(frame(16 << 20))
		}
	}))
	defer srv.Close()
	x, res, err := roundTrip(t, http.DefaultClient, srv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := io.Copy(io.Discard, res.Body); err != nil || n != 48*int64(len(small)) || x.Failure() != nil {
		t.Errorf("small frames: read %d bytes, err %v, failure %v; want all of them", n, err, x.Failure())
	}
	res.Body.Close()
	x, res, err = roundTrip(t, http.DefaultClient, srv.URL+"?big=1", true)
	if err != nil {
		t.Fatal(err)
	}
	n, rerr := io.Copy(io.Discard, res.Body)
	if !errors.Is(rerr, ErrRefused) || n > 48*int64(len(small)) {
		t.Errorf("a big frame: read %d bytes, err %v; want ErrRefused at its length", n, rerr)
	}
	if f := x.Failure(); f == nil || f.Kind != llm.KindServer || !errors.Is(f, ErrEventTooLarge) {
		t.Errorf("failure = %v; want KindServer, ErrEventTooLarge", f)
	}
}

func TestExchangeLearnsCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Request-Id", "req_"+r.Header.Get("X-Amz-Security-Token")+"_"+r.Header.Get("Authorization"))
		w.WriteHeader(400)
		io.WriteString(w, `{"error":"`+r.Header.Get("Authorization")+`"}`)
	}))
	defer srv.Close()
	ep := &Endpoint{Provider: "p", RequestID: "Request-Id"}
	x := ep.NewExchange(false, false)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	sig := "AWS4-HMAC-SHA256 Credential=AKIAEXAMPLEKEY123456/20261204/eu-west-1/bedrock/aws4_request, SignedHeaders=host;x-amz-date, Signature=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	req.Header.Set("Authorization", sig)
	req.Header.Set("X-Amz-Security-Token", "session-token-abcdefghijklmnop")
	res, err := x.Middleware(req, http.DefaultClient.Do)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := x.RequestID()
	detail := x.Detail(string(x.Body()))
	for _, secret := range []string{"AKIAEXAMPLEKEY123456", "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "session-token-abcdefghijklmnop"} {
		if strings.Contains(id, secret) || strings.Contains(detail, secret) {
			t.Errorf("%q survives: request id %q, detail %q", secret, id, detail)
		}
	}
}

func TestOpaqueKeepsTheCauseOutOfItsText(t *testing.T) {
	cause := errors.New("body: the user's prompt")
	err := Opaque(cause)
	if strings.Contains(err.Error(), "prompt") || !errors.Is(err, cause) {
		t.Errorf("Opaque: %q, Is %v", err, errors.Is(err, cause))
	}
}
