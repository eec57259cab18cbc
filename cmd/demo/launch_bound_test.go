package main

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestLaunchStopsEveryRankWithinItsGrace: without a deadline, once a rank
// has failed (here one that only lost a peer, which opens the window for
// the rank that failed first) every rank is gone within the grace period
// of that failure, SIGTERM ignored or not: the window does not add to it.
func TestLaunchStopsEveryRankWithinItsGrace(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const grace = 2 * time.Second
	out, errw := &syncBuffer{}, &syncBuffer{}
	var pids []int
	err = launch(launchSpec{n: 3, exe: exe, grace: grace, stdout: out, stderr: errw,
		env: []string{envFakeRank + "=peerlost-stubborn"}, sigs: make(chan os.Signal),
		started: func(p []int) { pids = p }})
	ended := time.Now()
	if err == nil || !strings.Contains(err.Error(), "rank 0 exited 3 (lost a peer) after") || !strings.HasSuffix(err.Error(), "; 2 others stopped") {
		t.Fatalf("launch: %v\nstderr:\n%s", err, errw.String())
	}
	m := regexp.MustCompile(`\[0\] failing at (\d+)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("rank 0 did not say when it failed:\n%s", out.String())
	}
	ns, _ := strconv.ParseInt(m[1], 10, 64)
	took := ended.Sub(time.Unix(0, ns))
	t.Logf("every rank gone %v after the first failure (grace %v)", took.Round(time.Millisecond), grace)
	if took > grace+700*time.Millisecond { // the peer-lost window (1 s) must not come on top of the grace
		t.Errorf("the launcher took %v after the first failure, want the grace %v and little more", took, grace)
	}
	waitGone(t, pids, time.Second)
}
