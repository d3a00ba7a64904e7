package llm_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/llm"
)

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

func TestKindOf(t *testing.T) {
	wrap := func(err error) error { return &url.Error{Op: "Post", URL: "https://api.example", Err: err} }
	cases := []struct {
		name string
		err  error
		want llm.Kind
	}{
		{"nil", nil, llm.KindUnknown},
		{"plain", errors.New("boom"), llm.KindUnknown},
		{"canceled", context.Canceled, llm.KindCanceled},
		{"wrapped canceled", wrap(context.Canceled), llm.KindCanceled},
		{"deadline", context.DeadlineExceeded, llm.KindTimeout},
		{"wrapped deadline", fmt.Errorf("attempt: %w", wrap(context.DeadlineExceeded)), llm.KindTimeout},
		{"net timeout", wrap(&net.OpError{Op: "dial", Err: timeoutErr{}}), llm.KindTimeout},
		{"refused", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), llm.KindConnection},
		{"reset", wrap(&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}), llm.KindConnection},
		{"unexpected EOF", wrap(io.ErrUnexpectedEOF), llm.KindConnection},
		{"EOF", wrap(io.EOF), llm.KindConnection},
		{"dns", wrap(&net.DNSError{Err: "no such host", Name: "api.example"}), llm.KindConnection},
		{"tls", wrap(x509.UnknownAuthorityError{}), llm.KindConnection},
		{"llm error kind", fmt.Errorf("x: %w", &llm.Error{Kind: llm.KindQuota, Status: 429}), llm.KindQuota},
		{"llm error status only", &llm.Error{Status: 529}, llm.KindOverloaded},
		{"llm error cause only", &llm.Error{Err: wrap(context.Canceled)}, llm.KindCanceled},
		{"llm error nothing", &llm.Error{}, llm.KindUnknown},
	}
	for _, c := range cases {
		if got := llm.KindOf(c.err); got != c.want {
			t.Errorf("%s: KindOf = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestKindOfAStatus: a failure whose body says nothing more is classified
// by its status alone; a 2xx is KindServer (an answer that was not one).
func TestKindOfAStatus(t *testing.T) {
	want := map[int]llm.Kind{
		200: llm.KindServer, 302: llm.KindUnknown,
		400: llm.KindBadRequest, 401: llm.KindAuth, 402: llm.KindQuota, 403: llm.KindAuth, 404: llm.KindNotFound,
		408: llm.KindTimeout, 409: llm.KindConflict, 413: llm.KindBadRequest, 422: llm.KindBadRequest,
		429: llm.KindRateLimited, 500: llm.KindServer, 502: llm.KindServer, 503: llm.KindOverloaded,
		504: llm.KindServer, 529: llm.KindOverloaded, 599: llm.KindServer,
	}
	for status, k := range want {
		if got := classify.VendorOther.Kind(status, "", "", "", nil); got != k {
			t.Errorf("VendorOther.Kind(%d) = %v, want %v", status, got, k)
		}
	}
}

func TestKindNamesAreUniqueAndComplete(t *testing.T) {
	seen := map[string]bool{}
	for k := range llm.NumKinds {
		name := llm.Kind(k).String()
		if name == "" || seen[name] {
			t.Fatalf("kind %d has name %q (duplicate or empty)", k, name)
		}
		seen[name] = true
	}
	if llm.Kind(200).String() != "unknown" {
		t.Fatal("out-of-range kind should print unknown")
	}
}

func TestErrorMessage(t *testing.T) {
	e := &llm.Error{Provider: "anthropic", Status: 429, Type: "rate_limit_error", Code: "enforced_spend_limit_reached",
		Message: "limit reached", RequestID: "req_1", RetryAfter: 4 * time.Second, Kind: llm.KindQuota}
	want := "anthropic: quota (HTTP 429) rate_limit_error/enforced_spend_limit_reached: limit reached [request-id req_1, retry after 4s]"
	if e.Error() != want {
		t.Fatalf("got  %s\nwant %s", e.Error(), want)
	}
	cause := errors.New("dial tcp: connection refused")
	e = &llm.Error{Provider: "openai", Kind: llm.KindConnection, Err: cause}
	if !strings.HasSuffix(e.Error(), "connection: dial tcp: connection refused") || !errors.Is(e, cause) {
		t.Fatalf("transport error: %s", e)
	}
}

// TestEveryDeclaredKindIsCounted reads kind.go: every constant of type
// Kind has an explicit number below NumKinds, each number once, and
// NumKinds is their count. A kind added after KindCanceled with iota's
// next number, NumKinds left as it was, behaved as KindUnknown in every
// table and was named "unknown" in telemetry.
func TestEveryDeclaredKindIsCounted(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "kind.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		inKinds := false // the last spec with a type declared a Kind
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if vs.Type == nil && len(vs.Values) == 0 && inKinds {
				t.Fatalf("%s repeats the Kind above it with iota's next number; give it an explicit one", vs.Names[0].Name)
			}
			if vs.Type != nil || len(vs.Values) > 0 {
				id, ok := vs.Type.(*ast.Ident)
				inKinds = ok && id.Name == "Kind"
			}
			if !inKinds {
				continue
			}
			for i, name := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.INT {
					t.Fatalf("%s has no explicit number; number each Kind", name.Name)
				}
				v, err := strconv.ParseInt(lit.Value, 0, 64)
				if err != nil || v < 0 || v >= int64(llm.NumKinds) {
					t.Fatalf("%s = %s: not below NumKinds (%d); raise NumKinds", name.Name, lit.Value, llm.NumKinds)
				}
				if other, dup := seen[v]; dup {
					t.Fatalf("%s and %s are both %d", other, name.Name, v)
				}
				seen[v] = name.Name
			}
		}
	}
	if len(seen) != llm.NumKinds {
		t.Fatalf("kind.go declares %d kinds; NumKinds is %d", len(seen), llm.NumKinds)
	}
}
