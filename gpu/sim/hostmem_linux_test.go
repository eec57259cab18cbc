//go:build linux

package sim_test

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
)

// addressLimitEnv tells a re-executed test binary to run the child half of
// TestAddressLimit.
const addressLimitEnv = "CHOREO_SIM_TEST_ADDRESS_LIMIT"

// TestAddressLimit (defect D8): in a process whose address space RLIMIT_AS
// caps at 3 GiB beyond what it already uses (as under `ulimit -v`), the
// sim sizes itself below that, a 10 GiB allocation fails with
// ErrOutOfMemory instead of Go's fatal out-of-memory, and an allocation of
// the whole size it reports succeeds. It runs in a
// child process: the limit cannot be lifted again.
func TestAddressLimit(t *testing.T) {
	if os.Getenv(addressLimitEnv) == "1" {
		addressLimitChild(t)
		return
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory does not fit an address limit")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAddressLimit$", "-test.v")
	cmd.Env = append(os.Environ(), addressLimitEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestAddressLimit") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func addressLimitChild(t *testing.T) {
	const gib = 1 << 30
	statm, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skipf("no /proc/self/statm: %v", err)
	}
	pages, err := strconv.ParseUint(strings.Fields(string(statm))[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	limit := pages*uint64(os.Getpagesize()) + 3*gib
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	dev, err := sim.New()
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	size := dev.Properties().MemoryBytes
	if size >= 3*gib || size < gib {
		t.Fatalf("device of %d bytes under a 3 GiB address limit", size)
	}
	if _, err := dev.Alloc(10*gib, gpu.DeviceMem); !errors.Is(err, gpu.ErrOutOfMemory) {
		t.Fatalf("10 GiB allocation: %v, want ErrOutOfMemory", err)
	}
	b, err := dev.Alloc(int(size), gpu.HostMem)
	if err != nil {
		t.Fatalf("allocation of the whole %d bytes: %v", size, err)
	}
	mem := b.Bytes()
	mem[len(mem)-1] = 1 // the block is really there: no fault
	if err := b.Free(); err != nil {
		t.Fatal(err)
	}
}
