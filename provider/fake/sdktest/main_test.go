package sdktest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// opencensus (imported by anthropic-sdk-go's vertex, through
	// google.golang.org/api) starts a worker goroutine in its init.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}
