package race

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// TestRequestIDPrefersTheAnswerThenTheFailureThenTheHeaders: the id of an
// attempt the race ended is the one its answer carried, else its error's,
// else its stream's headers'.
func TestRequestIDPrefersTheAnswerThenTheFailureThenTheHeaders(t *testing.T) {
	failed := fmt.Errorf("wrapped: %w", &llm.Error{Kind: llm.KindServer, RequestID: "req-err"})
	for _, c := range []struct {
		name   string
		resp   *llm.Response
		err    error
		opened string
		want   string
	}{
		{"answer", &llm.Response{RequestID: "req-ans"}, nil, "req-hdr", "req-ans"},
		{"failure", nil, failed, "req-hdr", "req-err"},
		{"failure without id", nil, &llm.Error{Kind: llm.KindServer}, "req-hdr", "req-hdr"},
		{"canceled", nil, context.Canceled, "req-hdr", "req-hdr"},
		{"nothing", nil, nil, "", ""},
	} {
		if got := RequestID(c.resp, c.err, c.opened); got != c.want {
			t.Errorf("%s: RequestID = %q; want %q", c.name, got, c.want)
		}
	}
}

// TestReasonNamesHowTheAttemptLost: canceled, failed first, or canceled
// after outliving its patience.
func TestReasonNamesHowTheAttemptLost(t *testing.T) {
	for _, c := range []struct {
		failed  bool
		overdue time.Duration
		want    string
	}{
		{false, 0, "lost the race to eu"},
		{true, 0, "failed; eu answered"},
		{true, time.Second, "failed; eu answered"},
		{false, 2 * time.Second, "no answer within its patience of 2s; eu answered first"},
	} {
		if got := Reason("eu", c.failed, c.overdue); got != c.want {
			t.Errorf("Reason(eu, %v, %v) = %q; want %q", c.failed, c.overdue, got, c.want)
		}
	}
}
