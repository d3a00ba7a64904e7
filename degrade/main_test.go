package degrade_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: a
// LastGood's write-behind writer must be gone once its queue is empty.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
