package test

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/testenv"
)

// done matches a check's last line.
var done = regexp.MustCompile(`CHECK done ok=(\d+) failed=(\d+) live-fences=(-?\d+)`)

// exchangeSteps are the matrix's steps of the exchange ops: each must
// have run, and passed, on every rank.
var exchangeSteps = []string{"alltoall/", "alltoallv/", "gather/", "scatter/", "reduce/", "batch/"}

// TestMatrix: every op is correct on the matrix of ops, dtypes and sizes
// (integers exact, floats within per-dtype error bounds) across 2 and 4
// processes, the exchange ops (all-to-all even and uneven with zero
// counts, gather, scatter, reduce to a root, a batched ring) included,
// and no fence is left live. The plain run takes 2 processes over shared
// memory (the cluster runs the whole matrix of ops, for most of a minute
// under -race), and TestTwoHostsMatrix runs it on 4 processes linked by
// both; CHOREO_TEST_FULL=1 both sizes over both.
func TestMatrix(t *testing.T) {
	for _, tr := range transports {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/%d", tr, n), func(t *testing.T) {
				testenv.Sliced(t, tr == "shm" && n == 2)
				matrix(t, tr, n)
			})
		}
	}
}

// TestMatrixOnGPU: with CHOREO_BACKEND naming a GPU backend (cuda), the
// matrix on 2 processes sharing the GPU, on the host-staged path and on
// the device path (the ranks' kernels read each other's buffers through
// IPC). Skips on the sim's backends, which TestMatrix covers.
func TestMatrixOnGPU(t *testing.T) {
	b := testenv.Backend()
	if strings.HasPrefix(b, "sim") {
		t.Skipf("backend %s: the matrix on a GPU runs with CHOREO_BACKEND=cuda", b)
	}
	for _, path := range []string{"staged", "device"} {
		t.Run(path, func(t *testing.T) {
			t.Setenv("CHOREO_DATAPATH", path)
			matrix(t, "shm", 2, "--backend", b)
		})
	}
}

func matrix(t *testing.T, tr string, n int, flags ...string) {
	{
		{
			out, err := launch(t, tr, n, append([]string{"check", "matrix"}, flags...)...)
			if err != nil {
				t.Fatalf("%v:\n%s", err, out)
			}
			ends := done.FindAllStringSubmatch(out, -1)
			if len(ends) != n {
				t.Fatalf("%d of %d ranks finished:\n%s", len(ends), n, out)
			}
			for _, m := range ends {
				if m[1] == "0" || m[2] != "0" || m[3] != "0" {
					t.Fatalf("%s:\n%s", m[0], out)
				}
			}
			for _, step := range exchangeSteps {
				for r := range n {
					if !strings.Contains(out, fmt.Sprintf("[%d] CHECK %s", r, step)) {
						t.Fatalf("rank %d ran no %s step:\n%s", r, step, out)
					}
				}
			}
		}
	}
}

// TestMismatchedShapes: ranks all-reducing different shapes fail, every
// one of them, with ErrShapeMismatch (the check's step passes when so).
func TestMismatchedShapes(t *testing.T) {
	out, err := launch(t, "auto", 3, "check", "mismatch")
	if err != nil || strings.Count(out, "CHECK mismatch ok") != 3 {
		t.Fatalf("%v:\n%s", err, out)
	}
}

// TestMismatchedAllToAllV: an all-to-all whose counts disagree between
// two ranks (the last expects one row fewer from rank 0 than it sends)
// fails on every rank with ErrShapeMismatch, over either transport.
func TestMismatchedAllToAllV(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			out, err := launch(t, tr, 3, "check", "mismatch-alltoallv")
			if err != nil || strings.Count(out, "CHECK mismatch/alltoallv ok") != 3 {
				t.Fatalf("%v:\n%s", err, out)
			}
		})
	}
}

// TestKillMidAllReduce: a rank SIGKILLed in the middle of a 64 MiB
// all-reduce leaves every survivor with an error matching ErrPeerLost,
// soon, and a clean exit (its own, with the peer-lost status) with no
// fence left live. The plain run takes 2 processes over TCP and 4 over
// shared memory; CHOREO_TEST_FULL=1 both sizes over both.
func TestKillMidAllReduce(t *testing.T) {
	for _, tr := range transports {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/%d", tr, n), func(t *testing.T) {
				testenv.Sliced(t, (tr == "tcp") == (n == 2))
				killMidAllReduce(t, tr, n)
			})
		}
	}
}

func killMidAllReduce(t *testing.T, tr string, n int) {
	c := newCluster(t, n, tr)
	ranks := c.startAll("check", "soak", "--size", "64MiB", "--iters", "100000", "--timeout", "60s")
	for _, k := range ranks {
		if _, ok := k.await(2*time.Minute, "SOAK 1"); !ok {
			t.Fatalf("rank %d never got going:\n%s", k.r, k.text())
		}
	}
	victim := ranks[n-1]
	time.Sleep(20 * time.Millisecond) // into the next all-reduce
	killed := time.Now()
	if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, k := range ranks[:n-1] {
		l, ok := k.await(30*time.Second, "CHECK soak/")
		if !ok {
			t.Fatalf("rank %d: no failure 30 s after the kill:\n%s", k.r, k.text())
		}
		if !strings.Contains(l.text, " FAIL ErrPeerLost ") {
			t.Fatalf("rank %d: %s, want ErrPeerLost", k.r, l.text)
		}
		t.Logf("rank %d saw the peer lost %v after the kill", k.r, l.at.Sub(killed).Round(time.Millisecond))
		if !k.exited(30 * time.Second) {
			t.Fatalf("rank %d did not exit:\n%s", k.r, k.text())
		}
		m := done.FindStringSubmatch(k.text())
		if m == nil || m[3] != "0" {
			t.Fatalf("rank %d: fences left live or no summary:\n%s", k.r, k.text())
		}
		if code := k.exitCode(); code != 3 {
			t.Fatalf("rank %d exited with %d, want 3 (a peer was lost):\n%s", k.r, code, k.text())
		}
	}
}
