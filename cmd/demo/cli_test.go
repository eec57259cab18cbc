package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/trace"
)

// parse runs parseArgs on args with fresh flags.
func parse(args ...string) (c *cli, cmd string, code int, ok bool, out, errOut string) {
	c = &cli{}
	var so, se strings.Builder
	ctx, code, ok := parseArgs(c, args, &so, &se)
	if ctx != nil {
		cmd = ctx.Command()
	}
	return c, cmd, code, ok, so.String(), se.String()
}

// TestFlagsAndAliases: -np is -n wherever -n is (launch, run, bench, and
// run as the default), and run's and bench's flags are accepted after
// `launch ... run`, as a rank's command line, as they are by `demo run`.
func TestFlagsAndAliases(t *testing.T) {
	if c, cmd, _, ok, _, se := parse("launch", "-np", "3", "run", "--steps", "2"); !ok || cmd != "launch <args>" || c.Launch.N != 3 {
		t.Errorf("launch -np 3: ok %v, command %q, n %d, stderr %q", ok, cmd, c.Launch.N, se)
	}
	if c, _, _, ok, _, _ := parse("launch", "-np=5"); !ok || c.Launch.N != 5 {
		t.Errorf("launch -np=5: ok %v, n %d", ok, c.Launch.N)
	}
	if c, cmd, _, ok, _, _ := parse("-np", "2", "--inproc"); !ok || cmd != "run" || c.Run.Ranks != 2 {
		t.Errorf("-np 2 (run): ok %v, command %q, ranks %d", ok, cmd, c.Run.Ranks)
	}
	if c, _, _, ok, _, _ := parse("bench", "-n", "3"); !ok || c.Bench.Ranks != 3 {
		t.Errorf("bench -n 3: ok %v, ranks %d", ok, c.Bench.Ranks)
	}
	if c, _, _, ok, _, _ := parse("launch", "-n", "2", "--", "-np", "7"); !ok || strings.Join(c.Launch.Args, " ") != "-- -np 7" {
		t.Errorf("after --: ok %v, args %q (want them as given)", ok, c.Launch.Args)
	}
	var help strings.Builder
	for _, argv := range [][]string{
		{"node", "run", "--metrics", ":9480", "--trace", "t.json", "--metrics-linger", "1s"},
		{"node", "bench", "--metrics", ":9480", "--datapath", "staged", "--trace", "t.json"},
	} {
		if _, err := checkArgs(argv, &help); err != nil {
			t.Errorf("%q refused: %v", argv, err)
		}
	}
}

// TestParseErrorIsOneLineAndAHint: a refused command line is one line
// naming the fault and one hint to the right help, exit status 2, and no
// help text; an unknown command says so (kong would show run's help).
func TestParseErrorIsOneLineAndAHint(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		first, see string
	}{
		{[]string{"--bogus"}, "demo: unknown flag --bogus", "see 'demo --help'"},
		{[]string{"run", "--steps", "x"}, `demo: --steps: expected a valid 64 bit int but got "x"`, "see 'demo run --help'"},
		{[]string{"frobnicate"}, `demo: unknown command "frobnicate": demo has run, bench, launch, node, trace`, "see 'demo --help'"},
		{[]string{"-v", "frobnicate"}, `demo: unknown command "frobnicate"`, "see 'demo --help'"},
		{[]string{"node", "frob"}, `demo: unknown command "frob": demo node has run, bench, check`, "see 'demo node --help'"},
		{[]string{"trace", "draw"}, `demo: unknown command "draw": demo trace has render`, "see 'demo trace --help'"},
		{[]string{"launch", "-n", "2", "frob"}, `demo: unknown command "frob": demo launch runs one of run, bench, check`, "see 'demo launch --help'"},
		{[]string{"launch", "-np", "p"}, `demo: --n: expected a valid 64 bit int but got "p"`, "see 'demo launch --help'"},
	} {
		_, _, code, ok, so, se := parse(tc.args...)
		lines := strings.Split(strings.TrimSuffix(se, "\n"), "\n")
		if ok || code != exitUsage || so != "" || len(lines) != 2 ||
			!strings.HasPrefix(lines[0], tc.first) || !strings.Contains(lines[1], tc.see) {
			t.Errorf("%q: ok %v, code %d, stdout %q, stderr:\n%s\nwant 2 lines: %q..., ...%q", tc.args, ok, code, so, se, tc.first, tc.see)
		}
	}
	if _, _, code, ok, so, _ := parse("run", "--help"); ok || code != 0 || !strings.Contains(so, "Usage: demo run") {
		t.Errorf("--help: ok %v, code %d, help %q", ok, code, so)
	}
}

// TestParseErrorExitsTwo: the demo itself, a process, exits 2 on a bad
// flag, its own or one of the ranks' command line that launch checks,
// with two lines on stderr and nothing on stdout.
func TestParseErrorExitsTwo(t *testing.T) {
	for _, args := range [][]string{{"run", "-np", "2", "--bogus"}, {"launch", "-np", "2", "run", "--bogus"}} {
		cmd, stdout, stderr := demoCmd(t, time.Minute, args...)
		if code := waitDemo(t, cmd.Wait); code != exitUsage {
			t.Errorf("%q: exit status %d, want %d", args, code, exitUsage)
		}
		if n := strings.Count(stderr.String(), "\n"); n != 2 || stdout.String() != "" {
			t.Errorf("%q: stdout %q, stderr (%d lines):\n%s", args, stdout, n, stderr)
		}
	}
}

// TestFailureReportOncePerFailure: rank 0 (or a process holding every
// rank) prints a failed collective's block; another launched rank one
// line.
func TestFailureReportOncePerFailure(t *testing.T) {
	cause := errors.New("shm: peer 1: recv: timeout")
	oe := &collectives.OpError{Op: "allreduce", Group: 7, Seq: 3, Rank: 2, Origin: 1, Cause: cause, Err: cause}
	err := fmt.Errorf("step 0: rank 2: all-reduce: %w", oe)
	var lead, other strings.Builder
	printFailure(&lead, err, true)
	printFailure(&other, err, false)
	if n := strings.Count(other.String(), "\n"); n != 1 || !strings.Contains(other.String(), "rank 2: allreduce (group 7 seq 3) failed; failed first: rank 1: shm: peer 1: recv: timeout") {
		t.Errorf("another rank's report (%d lines):\n%s", n, other.String())
	}
	if n := strings.Count(lead.String(), "\n"); n < 5 || !strings.HasSuffix(lead.String(), " step 0: rank 2: all-reduce\n") {
		t.Errorf("rank 0's report (%d lines):\n%s", n, lead.String())
	}
}

// TestBenchRowPrintedBeforeTheSweepEnds: the sweep's first row reaches
// stdout while the sweep still runs (the larger sizes after it take
// seconds): the child is interrupted as soon as the row is read, and its
// output has that row and none of the later ones.
func TestBenchRowPrintedBeforeTheSweepEnds(t *testing.T) {
	cmd, stdout, stderr := demoCmd(t, 2*time.Minute, "bench", "--inproc", "-n", "2", "--backend", "sim",
		"--ops", "allreduce", "--sizes", "4KiB,16MiB,64MiB,64MiB,64MiB")
	row := regexp.MustCompile(`(?m)^ *allreduce +4096 +1024 +float32 +sum +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$`)
	deadline := time.Now().Add(90 * time.Second)
	for !row.MatchString(stdout.String()) {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("no 4 KiB row read\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	_ = cmd.Wait()
	out := stdout.String()
	if strings.Contains(out, "67108864") || strings.Contains(out, "1-element float32 all-reduce") {
		t.Errorf("the sweep ended before its first row was read:\n%s", out)
	}
	header := strings.Split(out, "\n")[2]
	if !strings.HasPrefix(header, "       op   size(B)") || len(header) != len(row.FindString(out)) {
		t.Errorf("header %q and row %q are not aligned", header, row.FindString(out))
	}
}

// TestTraceWrittenOnSIGINT: Ctrl-C to a launch with --trace leaves the
// merged trace, holding every rank's part: each rank saves its part on the
// signal, and the launcher merges what its ranks left.
func TestTraceWrittenOnSIGINT(t *testing.T) {
	out := filepath.Join(t.TempDir(), "trace.json")
	cmd, stdout, stderr := demoCmd(t, 2*time.Minute, "run", "-np", "2", "--steps", "100000000", "--size", "4KiB",
		"--backend", "sim", "--trace", out)
	deadline := time.Now().Add(90 * time.Second)
	for !strings.Contains(stdout.String(), "[0] choreo demo:") { // joined: recording
		if time.Now().After(deadline) {
			t.Fatalf("the ranks did not join\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // some steps
	_ = cmd.Process.Signal(syscall.SIGINT)
	if code := waitDemo(t, cmd.Wait); code != 130 {
		t.Errorf("exit status %d, want 130 (interrupted)\nstderr:\n%s", code, stderr)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatalf("no trace after SIGINT: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	defer f.Close()
	tf, err := trace.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	tasks := map[int]int{}
	for _, e := range tf.TraceEvents {
		if e.Ph == "X" && e.Cat == "comm" && e.Name == "allreduce" {
			tasks[e.PID]++
		}
	}
	if tasks[0] == 0 || tasks[1] == 0 {
		t.Errorf("all-reduce spans per rank %v, want both ranks'\nstderr:\n%s", tasks, stderr)
	}
}

// TestLiftObsFlags: a launch's rank command line gives its --trace,
// --metrics and --metrics-linger to the launcher, in both spellings, and
// keeps the rest in order; the launcher's own flags win.
func TestLiftObsFlags(t *testing.T) {
	obs := obsFlags{Metrics: ":9000"}
	rest, err := liftObsFlags([]string{"run", "--steps", "3", "--trace", "t.json", "--metrics=:9480", "--metrics-linger=2s", "--size", "4KiB", "--", "--trace", "x"}, &obs)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rest, " "); got != "run --steps 3 --size 4KiB -- --trace x" {
		t.Errorf("rest %q", got)
	}
	if obs.Trace != "t.json" || obs.Metrics != ":9000" || obs.MetricsLinger != 2*time.Second {
		t.Errorf("lifted %+v", obs)
	}
	if _, err := liftObsFlags([]string{"run", "--trace"}, &obsFlags{}); !errors.Is(err, errMissingValue) {
		t.Errorf("--trace without a value: %v", err)
	}
}
