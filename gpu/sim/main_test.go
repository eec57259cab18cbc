package sim_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any queue goroutine outlives its device.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
