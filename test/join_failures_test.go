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

// The failures at start, each fast and named (the join timeout is 60 s
// here, so a failure that waited for it would show), and the bounded
// exit after them; and the false-positive twin of the peer timeout: a
// paused rank that resumes within it finds its group running.

// joinTimeout is every rank's join timeout in these tests: far above the
// bounds they assert.
const joinTimeout = "CHOREO_JOIN_TIMEOUT=60s"

// startWith starts rank r as `demo node <args>`, with extra variables on
// top of the cluster's.
func (c *procs) startWith(r int, extra []string, args ...string) *rank {
	c.t.Helper()
	saved := c.common
	c.common = append(append(append([]string(nil), saved...), joinTimeout), extra...)
	defer func() { c.common = saved }()
	k := c.start(r, args...)
	return k
}

// awaitText waits, up to d, for an output line containing all of parts,
// and returns it.
func (k *rank) awaitText(d time.Duration, parts ...string) (line, bool) {
	return k.awaitMatch(d, func(s string) bool { return containsAll(s, parts) })
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// failedWith waits, up to d, for k to exit with a failure, and returns its
// "demo: " error line.
func failedWith(t *testing.T, k *rank, d time.Duration) line {
	t.Helper()
	if !k.exited(d) {
		t.Fatalf("rank %d still running %v on:\n%s", k.r, d, k.text())
	}
	if k.exitCode() == 0 {
		t.Fatalf("rank %d exited 0:\n%s", k.r, k.text())
	}
	l, ok := k.awaitText(0, "demo: ")
	if !ok {
		t.Fatalf("rank %d printed no error:\n%s", k.r, k.text())
	}
	return l
}

// soak is a short soak every rank can finish: the group formed and works.
var soak = []string{"check", "soak", "--size", "64KiB", "--iters", "20"}

// finishedOK waits for k's soak to end well and k to exit 0.
func finishedOK(t *testing.T, k *rank) {
	t.Helper()
	if !k.exited(2 * time.Minute) {
		t.Fatalf("rank %d did not finish:\n%s", k.r, k.text())
	}
	m := done.FindStringSubmatch(k.text())
	if k.exitCode() != 0 || m == nil || m[2] != "0" {
		t.Fatalf("rank %d: exit %d:\n%s", k.r, k.exitCode(), k.text())
	}
}

// TestJoinWrongSecret: a rank whose secret is not the group's fails
// within seconds (not at its 60 s join timeout) saying authentication
// failed, and rank 0 logs the refused connection at Warn.
func TestJoinWrongSecret(t *testing.T) {
	c := newCluster(t, 2, "auto")
	zero := c.startWith(0, nil, "--verbose", "check", "soak")
	stranger := c.startWith(1, []string{"CHOREO_SECRET=not-the-group-secret-at-all"}, "check", "soak")
	started := time.Now()
	l := failedWith(t, stranger, 30*time.Second)
	t.Logf("the rank with the wrong secret failed %v after it started: %s", l.at.Sub(started).Round(time.Millisecond), l.text)
	if !strings.Contains(l.text, "authentication failed") {
		t.Fatalf("rank 1: %s, want it to say authentication failed", l.text)
	}
	if w, ok := zero.awaitText(10*time.Second, "WARN", "authentication failed"); !ok {
		t.Errorf("rank 0 logged no refused connection at Warn:\n%s", zero.text())
	} else {
		t.Logf("rank 0: %s", w.text)
	}
}

// TestJoinTransportMismatch: ranks that ask for different data planes
// all fail soon after the roster, naming each rank's transport.
func TestJoinTransportMismatch(t *testing.T) {
	c := newCluster(t, 3, "auto")
	ks := []*rank{
		c.startWith(0, []string{"CHOREO_TRANSPORT=tcp"}, soak...),
		c.startWith(1, []string{"CHOREO_TRANSPORT=shm"}, soak...),
		c.startWith(2, nil, soak...),
	}
	auto := regexp.MustCompile(`rank 2 auto`)
	for _, k := range ks {
		l := failedWith(t, k, 30*time.Second)
		t.Logf("rank %d: %s", k.r, l.text)
		if !containsAll(l.text, []string{"mismatch", "rank 0 tcp", "rank 1 shm"}) || !auto.MatchString(l.text) {
			t.Errorf("rank %d: %s, want a mismatch naming every rank's transport", k.r, l.text)
		}
	}
}

// TestJoinRankRestartedInRendezvous: a rank SIGKILLed after its hello,
// before the roster is complete, is dropped; the process restarted for
// it is accepted and the group forms and works.
func TestJoinRankRestartedInRendezvous(t *testing.T) {
	c := newCluster(t, 3, "auto")
	zero := c.startWith(0, nil, append([]string{"--verbose"}, soak...)...)
	victim := c.startWith(1, nil, soak...)
	if _, ok := zero.awaitText(time.Minute, "rendezvous: hello", `"peer_rank": 1`); !ok {
		t.Fatalf("rank 0 never had rank 1's hello:\n%s", zero.text())
	}
	if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !victim.exited(10 * time.Second) {
		t.Fatal("the killed rank did not exit")
	}
	if _, ok := zero.awaitText(30*time.Second, "dropped a rank", `"peer_rank": 1`); !ok {
		t.Logf("rank 0 did not log the drop (a restart at the same address may replace it first):\n%s", zero.text())
	}
	ks := []*rank{zero, c.startWith(1, nil, soak...), c.startWith(2, nil, soak...)}
	for _, k := range ks {
		finishedOK(t, k)
	}
}

// stoppedAtRoster starts 3 ranks of soak with rank 1 stopped (SIGSTOP)
// just after its hello, the last one rank 0 waits for, so at the roster,
// and returns them once rank 0 sent the roster: the others then connect
// to a rank that does not answer. Rank 2 says hello first, so that how
// long its start takes on a loaded machine does not matter (rank 1
// stopped before the roster for longer than the peer timeout would be
// dropped from the rendezvous).
func stoppedAtRoster(t *testing.T, c *procs) (zero, victim, two *rank) {
	t.Helper()
	zero = c.startWith(0, nil, append([]string{"--verbose"}, soak...)...)
	two = c.startWith(2, nil, soak...)
	all := func() string { return zero.text() + two.text() + victim.text() }
	if _, ok := zero.awaitText(time.Minute, "rendezvous: hello", `"peer_rank": 2`); !ok {
		t.Fatalf("rank 0 never had rank 2's hello:\n%s%s", zero.text(), two.text())
	}
	victim = c.startWith(1, nil, soak...)
	if _, ok := zero.awaitText(time.Minute, "rendezvous: hello", `"peer_rank": 1`); !ok {
		t.Fatalf("rank 0 never had rank 1's hello:\n%s", all())
	}
	if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if _, ok := zero.awaitText(time.Minute, "rendezvous: roster sent"); !ok {
		_ = syscall.Kill(victim.cmd.Process.Pid, syscall.SIGCONT)
		t.Fatalf("no roster:\n%s", all())
	}
	return zero, victim, two
}

// TestJoinRankLostAfterRoster: a rank lost after the roster went out and
// before the data plane is connected (it was stopped at the roster,
// and is killed while the others connect to it) fails the others soon,
// with ErrPeerLost naming it, not at their join timeout.
func TestJoinRankLostAfterRoster(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := newCluster(t, 3, tr)
			zero, victim, two := stoppedAtRoster(t, c)
			time.Sleep(500 * time.Millisecond) // the others are connecting their data plane to the stopped rank
			killed := time.Now()
			if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			for _, k := range []*rank{zero, two} {
				l := failedWith(t, k, 30*time.Second)
				t.Logf("rank %d failed %v after the kill: %s", k.r, l.at.Sub(killed).Round(time.Millisecond), l.text)
				// Each survivor sees rank 1 go and names it, unless the other
				// survivor, which has failed on it and leaves, is gone first:
				// then it names that one (either may fail first).
				other := zero
				if k == zero {
					other = two
				}
				named := containsAll(l.text, []string{"rank 1 lost before the data plane was connected", "peer lost"}) ||
					containsAll(l.text, []string{fmt.Sprintf("rank %d lost before the data plane was connected", other.r), "peer lost"})
				if !named {
					t.Errorf("rank %d: %s, want ErrPeerLost naming rank 1 (or rank %d, which left on it)", k.r, l.text, other.r)
				}
				if d := l.at.Sub(killed); d > 5*time.Second { // the line comes after the rank closed
					t.Errorf("rank %d failed %v after the kill: it waited for something", k.r, d)
				}
			}
		})
	}
}

// TestJoinRankPausedAtRoster: the twin of TestJoinRankLostAfterRoster. A
// rank stopped (SIGSTOP) from its hello, at the roster, until 3 s after it, while
// the others connect to it, is alive: the start-up detectors (rank 0's
// drop of a rank whose connection ends, the probes of the peers' control
// addresses, the relayed losses) leave it be, and every rank finishes.
func TestJoinRankPausedAtRoster(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := newCluster(t, 3, tr)
			zero, victim, two := stoppedAtRoster(t, c)
			time.Sleep(3 * time.Second)
			if err := syscall.Kill(victim.cmd.Process.Pid, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			for _, k := range []*rank{zero, victim, two} {
				finishedOK(t, k)
			}
		})
	}
}

// TestPausedRankResumes: the peer timeout's false-positive twin. A rank
// stopped (SIGSTOP) for 3 s and continued, in the middle of a soak of
// all-reduces, with the default 10 s peer timeout: every rank finishes
// without an error.
func TestPausedRankResumes(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := newCluster(t, 3, tr)
			ks := c.startAll("check", "soak", "--size", "256KiB", "--iters", "60")
			for _, k := range ks {
				if _, ok := k.await(2*time.Minute, "SOAK 2"); !ok {
					t.Fatalf("rank %d never got going:\n%s", k.r, k.text())
				}
			}
			paused := ks[1]
			pause(t, paused, 3*time.Second)
			resumed := time.Now()
			for _, k := range ks {
				finishedOK(t, k)
				if l, ok := k.await(0, "CHECK soak ok"); !ok || l.at.Before(resumed) {
					t.Fatalf("rank %d's soak ended before the pause did: it proves nothing:\n%s", k.r, k.text())
				}
			}
		})
	}
}

// pause stops k for d and continues it.
func pause(t *testing.T, k *rank, d time.Duration) {
	t.Helper()
	defer func() { _ = syscall.Kill(k.cmd.Process.Pid, syscall.SIGCONT) }()
	if err := syscall.Kill(k.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(d)
	if err := syscall.Kill(k.cmd.Process.Pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
}

// TestLongPauseIsALoss: a rank stopped for 20 s with a 10 s peer timeout
// (CHOREO_PEER_TIMEOUT) is lost: every other rank fails with ErrPeerLost
// within 11 s of the pause's start. Slow: run with CHOREO_TEST_FULL=1.
func TestLongPauseIsALoss(t *testing.T) {
	testenv.Sliced(t, false) // slow: a 20 s pause per transport
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			c := newCluster(t, 3, tr)
			c.common = append(c.common, "CHOREO_PEER_TIMEOUT=10s")
			ks := c.startAll("check", "soak", "--size", "1MiB", "--iters", "1000000", "--timeout", "60s")
			for _, k := range ks {
				if _, ok := k.await(2*time.Minute, "SOAK 2"); !ok {
					t.Fatalf("rank %d never got going:\n%s", k.r, k.text())
				}
			}
			paused := ks[1]
			started := time.Now()
			if err := syscall.Kill(paused.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			resume := time.AfterFunc(20*time.Second, func() { _ = syscall.Kill(paused.cmd.Process.Pid, syscall.SIGCONT) })
			defer resume.Stop()
			for _, k := range []*rank{ks[0], ks[2]} {
				l, ok := k.await(30*time.Second, "CHECK soak/")
				if !ok {
					t.Fatalf("rank %d: no failure 30 s into the pause:\n%s", k.r, k.text())
				}
				took := l.at.Sub(started)
				t.Logf("rank %d failed %v into the pause: %s", k.r, took.Round(time.Millisecond), l.text)
				// the data plane names the silent rank as its peer 1, the
				// control plane as rank 1; rank 2 may hear first that rank 0,
				// which lost rank 1 a moment before, has left
				named := strings.Contains(l.text, "rank 1") || strings.Contains(l.text, "peer 1")
				if k == ks[2] {
					named = named || strings.Contains(l.text, "peer 0")
				}
				if !strings.Contains(l.text, " FAIL ErrPeerLost ") || !named {
					t.Errorf("rank %d: %s, want ErrPeerLost naming rank 1", k.r, l.text)
				}
				if took > 11*time.Second {
					t.Errorf("rank %d failed %v into the pause, want within 11 s", k.r, took)
				}
				if !k.exited(15 * time.Second) {
					t.Errorf("rank %d did not exit within the peer timeout and 5 s of its failure", k.r)
				}
			}
		})
	}
}
