package actors_test

import (
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/internal/testenv"
)

// testenvDevice opens the test backend outside a *testing.T (the signal child).
func testenvDevice() (gpu.Device, error) { return gpu.Open(testenv.Backend()) }
