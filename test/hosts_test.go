package test

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/testenv"
)

// twoHosts starts 2 hosts x 2 ranks on this machine, each pair of ranks
// told it is a host of its own (CHOREO_HOST_ID), with the data plane left
// to auto: shared memory inside each host, TCP between them.
func twoHosts(t *testing.T, args ...string) []*rank {
	c := newCluster(t, 4, "auto")
	for r := range 4 {
		c.startWith(r, []string{fmt.Sprintf("CHOREO_HOST_ID=host%d", r/2)}, append([]string{"--verbose"}, args...)...)
	}
	return c.ranks
}

// TestTwoHostsMatrix: a group of 2 hosts x 2 ranks runs every op of the
// matrix exactly, each rank linking its host's peer by shared memory and
// the other host's ranks by TCP (the joined line shows each peer's link).
func TestTwoHostsMatrix(t *testing.T) {
	ranks := twoHosts(t, "check", "matrix")
	for _, k := range ranks {
		l, ok := k.awaitText(2*time.Minute, "joined", `"links"`)
		if !ok {
			t.Fatalf("rank %d never joined:\n%s", k.r, k.text())
		}
		mate := k.r ^ 1
		for peer := range 4 {
			want := "tcp"
			switch peer {
			case k.r:
				continue
			case mate:
				want = "shm"
			}
			if !strings.Contains(l.text, fmt.Sprintf("%d:%s", peer, want)) {
				t.Errorf("rank %d: peer %d not linked by %s: %s", k.r, peer, want, l.text)
			}
		}
	}
	for _, k := range ranks {
		finishedOK(t, k)
		for _, step := range exchangeSteps {
			if !strings.Contains(k.text(), fmt.Sprintf("[%d] CHECK %s", k.r, step)) {
				t.Fatalf("rank %d ran no %s step:\n%s", k.r, step, k.text())
			}
		}
	}
}

// TestTwoHostsKill: a rank SIGKILLed on either host, in the middle of an
// all-reduce, makes every survivor fail with ErrPeerLost (in about a
// second: the time is logged).
func TestTwoHostsKill(t *testing.T) {
	for _, victim := range []int{1, 2} {
		t.Run(fmt.Sprintf("rank%d", victim), func(t *testing.T) {
			testenv.Sliced(t, victim == 1) // the plain run kills on host 0; the paused twin pauses on host 1
			ranks := twoHosts(t, "check", "soak", "--size", "4MiB", "--iters", "100000", "--timeout", "60s")
			for _, k := range ranks {
				if _, ok := k.await(2*time.Minute, "SOAK 1"); !ok {
					t.Fatalf("rank %d never got going:\n%s", k.r, k.text())
				}
			}
			killed := time.Now()
			if err := syscall.Kill(ranks[victim].cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for _, k := range ranks {
				if k.r == victim {
					continue
				}
				l, ok := k.await(30*time.Second, "CHECK soak/")
				if !ok {
					t.Fatalf("rank %d: no failure 30 s after the kill:\n%s", k.r, k.text())
				}
				if !strings.Contains(l.text, " FAIL ErrPeerLost ") {
					t.Fatalf("rank %d: %s, want ErrPeerLost", k.r, l.text)
				}
				t.Logf("rank %d saw the peer lost %v after the kill", k.r, l.at.Sub(killed).Round(time.Millisecond))
			}
		})
	}
}

// TestTwoHostsPausedRankKept: the twin of TestTwoHostsKill. A rank on
// either host stopped for 3 s (SIGSTOP, then SIGCONT) in the middle of the
// soak is alive: no survivor declares it lost, and every rank finishes
// its soak correctly.
func TestTwoHostsPausedRankKept(t *testing.T) {
	for _, victim := range []int{1, 2} {
		t.Run(fmt.Sprintf("rank%d", victim), func(t *testing.T) {
			testenv.Sliced(t, victim == 2)
			ranks := twoHosts(t, "check", "soak", "--size", "64KiB", "--iters", "3000")
			for _, k := range ranks {
				if _, ok := k.await(2*time.Minute, "SOAK 1"); !ok {
					t.Fatalf("rank %d never got going:\n%s", k.r, k.text())
				}
			}
			pid := ranks[victim].cmd.Process.Pid
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * time.Second)
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			resumed := time.Now()
			for _, k := range ranks {
				finishedOK(t, k)
				if l, ok := k.awaitText(0, "CHECK soak"); !ok || l.at.Before(resumed) {
					t.Fatalf("rank %d's soak ended before the pause did (the test proves nothing):\n%s", k.r, k.text())
				}
				if strings.Contains(k.text(), "ErrPeerLost") {
					t.Fatalf("rank %d declared a paused rank lost:\n%s", k.r, k.text())
				}
			}
		})
	}
}
