package testenv

import (
	"os"
	"testing"
)

// FullEnv names the environment variable that asks for the whole of every
// long test matrix and the slow tests: CHOREO_TEST_FULL=1 (.ci/run sets
// it). Without it, `go test ./...` runs a representative slice of each
// long matrix (every op, every dtype family, both placements, each
// transport at least once; the costly large payloads on fewer rank
// counts). The randomized test's length is its own (CHOREO_RANDOM_OPS).
const FullEnv = "CHOREO_TEST_FULL"

// Full reports whether CHOREO_TEST_FULL asks for the full matrices: any
// value but "", "0" and "false".
func Full() bool {
	switch os.Getenv(FullEnv) {
	case "", "0", "false":
		return false
	}
	return true
}

// Sliced skips t, a case of a long matrix, unless keep (the case is in
// the representative slice the plain run keeps) or Full; the skip names
// the variable that runs it.
func Sliced(t testing.TB, keep bool) {
	t.Helper()
	if !keep && !Full() {
		t.Skipf("outside the plain run's slice of this matrix; %s=1 runs it", FullEnv)
	}
}
