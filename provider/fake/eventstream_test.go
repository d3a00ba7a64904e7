package fake

import (
	"encoding/hex"
	"testing"
)

// The golden messages were encoded by aws-sdk-go-v2's
// aws/protocol/eventstream v1.7.27 Encoder in a scratch module (the fake
// may not depend on the SDK), with the headers in the order given here;
// that module's Decoder also decoded esMessage's output back to the same
// headers and payloads.
func TestEventStreamGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		headers []esHeader
		payload string
		golden  string
	}{
		{"chunk", []esHeader{{":event-type", "chunk"}, {":content-type", "application/json"}, {":message-type", "event"}},
			`{"bytes":"eyJ0eXBlIjoibWVzc2FnZV9zdG9wIn0="}`,
			"000000870000004b87ea2bf30b3a6576656e742d747970650700056368756e6b0d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d747970650700056576656e747b226279746573223a2265794a306558426c496a6f696257567a6332466e5a56397a64473977496e303d227dba48ab22"},
		{"exception", []esHeader{{":exception-type", "throttlingException"}, {":content-type", "application/json"}, {":message-type", "exception"}},
			`{"message":"Too many requests, please wait before trying again."}`,
			"000000b2000000613590d5d30f3a657863657074696f6e2d747970650700137468726f74746c696e67457863657074696f6e0d3a636f6e74656e742d747970650700106170706c69636174696f6e2f6a736f6e0d3a6d6573736167652d74797065070009657863657074696f6e7b226d657373616765223a22546f6f206d616e792072657175657374732c20706c656173652077616974206265666f726520747279696e6720616761696e2e227de8ffb26a"},
	} {
		got := hex.EncodeToString(esMessage(tc.headers, []byte(tc.payload)))
		if got != tc.golden {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.golden)
		}
	}
}
