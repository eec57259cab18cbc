package choreotest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that nothing of the kit (recorded queues, probes, holds)
// outlives the runtimes and devices the tests closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
