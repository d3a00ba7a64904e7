package storm

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestMain prints the lab's wall time: the real seconds that the scenarios'
// minutes of virtual time took.
func TestMain(m *testing.M) {
	start := time.Now()
	code := m.Run()
	fmt.Printf("storm lab: wall time %v (race detector: %v)\n", time.Since(start).Round(time.Millisecond), raceEnabled)
	os.Exit(code)
}
