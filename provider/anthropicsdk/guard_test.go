package anthropicsdk

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// TestGuardAfterTheCallBoundary pins how New puts its guarded HTTP client
// under the SDK: right after the first requestconfig.CallBoundary of the
// options anthropic.NewClient builds (the SDK's defaults, a boundary, the
// caller's options, a boundary), on every platform. An SDK that builds a
// client's options otherwise fails here: read guard and the SDK's
// client.go (NewClient) and internal/requestconfig/credential.go before
// moving the pin, and keep TestRedirectRefused passing with the SDK's own
// client.
func TestGuardAfterTheCallBoundary(t *testing.T) {
	hc := &http.Client{}
	for _, pl := range platforms() {
		client := pl.client(t, "http://127.0.0.1:1")
		var bounds []int
		for i, o := range client.Options {
			if isCallBoundary(o) {
				bounds = append(bounds, i)
				if got := fmt.Sprintf("%T", o); got != "requestconfig.CallBoundary" {
					t.Errorf("%s: the boundary is a %s", pl.name, got)
				}
			}
		}
		if len(bounds) != 2 || bounds[1] != len(client.Options)-1 {
			t.Fatalf("%s: anthropic.NewClient's options have boundaries at %v of %d; want two, the last one last: the SDK changed how it builds them",
				pl.name, bounds, len(client.Options))
		}
		out, ok := guard(client.Options, hc)
		if !ok || len(out) != len(client.Options)+1 || !isCallBoundary(out[bounds[0]]) || isCallBoundary(out[bounds[0]+1]) ||
			!isCallBoundary(out[len(out)-1]) {
			t.Errorf("%s: guard put the client elsewhere than right after the first boundary (ok %v)", pl.name, ok)
		}
		p, err := New(client, pl.options)
		if err != nil {
			t.Fatal(err)
		}
		if !p.guarded {
			t.Errorf("%s: New did not find the boundary", pl.name)
		}
	}
	// A client not built by anthropic.NewClient has no boundary: the
	// guarded client comes first, and the caller's options after it.
	opts := []option.RequestOption{option.WithAPIKey(testKey)}
	if out, ok := guard(opts, hc); ok || len(out) != 2 {
		t.Errorf("without a boundary: ok %v, %d options", ok, len(out))
	}
	p, err := New(anthropic.Client{Options: opts}, Config{})
	if err != nil || p.guarded {
		t.Errorf("without a boundary: %v, guarded %v", err, p.guarded)
	}
}
