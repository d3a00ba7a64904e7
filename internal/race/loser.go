package race

import (
	"errors"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// RequestID is the provider's request id of an attempt the race ended:
// its answer's, resp (a stream it committed, or an answer that came as it
// was canceled), its failure's, err, or opened, the one its stream's
// headers carried before it was canceled; "" when none arrived.
func RequestID(resp *llm.Response, err error, opened string) string {
	if resp != nil {
		return resp.RequestID
	}
	var le *llm.Error
	if err != nil && errors.As(err, &le) && le.RequestID != "" {
		return le.RequestID
	}
	return opened
}

// Reason is the record's reason for an attempt that lost its race to
// winner (a target's name): canceled because winner answered, or, when
// failed, ended by a failure of its own before winner answered. overdue
// is the patience the attempt outlived when it was the slow attempt of a
// patience race, 0 otherwise.
func Reason(winner string, failed bool, overdue time.Duration) string {
	switch {
	case failed:
		return "failed; " + winner + " answered"
	case overdue > 0:
		return "no answer within its patience of " + overdue.String() + "; " + winner + " answered first"
	}
	return "lost the race to " + winner
}
