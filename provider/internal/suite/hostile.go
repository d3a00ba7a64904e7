package suite

// Plumbing for the hostile-upstream tests of the adapters over the
// official SDKs (provider/anthropicsdk, provider/openaisdk,
// provider/genai), which attack each adapter as an endless body, a gzip
// bomb, an echoing gateway and a redirecting host would.

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// ServeOn starts a loopback server on addr ("127.0.0.2:0", say), closed
// when t ends, counting in n (when not nil) the requests it receives.
// The body of each request is read before h runs.
func ServeOn(t testing.TB, addr string, n *atomic.Int64, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n != nil {
			n.Add(1)
		}
		io.Copy(io.Discard, r.Body)
		h(w, r)
	}))
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// HeapGrowth returns how many bytes f allocated (TotalAlloc), after a
// collection: what a capped attempt must keep below what the server sent.
func HeapGrowth(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// CredentialsIn returns every credential h carries, as a server receives
// them: x-api-key, api-key, x-goog-api-key and X-Amz-Security-Token
// whole; of an Authorization header the token after its scheme, or of
// AWS SigV4 the access key id and the signature. It is written apart from
// the adapters' own reading (wire.Exchange), so that the tests search for
// what was sent, not for what the code under test thinks was sent.
func CredentialsIn(h http.Header) []string {
	var out []string
	for _, name := range []string{"X-Api-Key", "Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token"} {
		out = append(out, h.Values(name)...)
	}
	for _, v := range h.Values("Authorization") {
		scheme, rest, _ := strings.Cut(v, " ")
		if !strings.HasPrefix(scheme, "AWS4-") {
			out = append(out, rest)
			continue
		}
		for _, kv := range strings.Split(rest, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(kv), "=")
			switch k {
			case "Credential":
				akid, _, _ := strings.Cut(val, "/")
				out = append(out, akid)
			case "Signature":
				out = append(out, val)
			}
		}
	}
	return out
}
