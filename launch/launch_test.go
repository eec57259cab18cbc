package launch

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The failure line stays within MaxSummary however long the rank's last
// line, cut on a character boundary, and names the rank, its status and
// the others stopped.
func TestVerdictIsOneBoundedLine(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 3")
	if err := cmd.Run(); err == nil {
		t.Fatal("sh did not fail")
	}
	m := &member{id: 17, started: time.Now().Add(-420 * time.Millisecond)}
	e := exit{m: m, state: cmd.ProcessState, at: time.Now()}
	long := strings.Repeat("é", 300) + "\nsecond line\x1b[31m"
	err := verdict(outcome{failed: []exit{e, e}, stopped: 255}, "rank", 0, 0, func(exit) string { return long })
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 1 || !errors.Is(err, ErrFailed) {
		t.Fatalf("verdict: %v", err)
	}
	msg := err.Error()
	if len(msg) > MaxSummary || strings.ContainsAny(msg, "\n\x1b") || !strings.HasPrefix(msg, "rank 17 exited 3 after 4") ||
		!strings.HasSuffix(msg, "...; 1 more failed; 255 others stopped") || !strings.Contains(msg, ": éé") {
		t.Errorf("verdict %q (%d bytes)", msg, len(msg))
	}
	if !strings.HasSuffix(strings.TrimSuffix(msg, "...; 1 more failed; 255 others stopped"), "é") {
		t.Errorf("cut inside a character: %q", msg)
	}
	if err := verdict(outcome{}, "rank", 0, 0, nil); err != nil {
		t.Errorf("success: %v", err)
	}
	err = verdict(outcome{interrupted: os.Interrupt, stopped: 4}, "rank", 0, 0, nil)
	if !errors.As(err, &ee) || ee.Code != 130 || err.Error() != "interrupted (interrupt); 4 ranks stopped" || !errors.Is(err, ErrInterrupted) {
		t.Errorf("interrupted: %v", err)
	}
}

// What a node reads from its standard input is what the launcher wrote:
// any value, quoted, and the end of the block.
func TestEnvBlockRoundTrip(t *testing.T) {
	entries := []string{EnvSecret + "=s3cr3t with spaces\nand a newline", EnvRun + "=r1", "A=b=c", "EMPTY="}
	r := bufio.NewReader(strings.NewReader(envBlock(entries) + "rest"))
	var got []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\n" {
			break
		}
		got = append(got, line)
	}
	if len(got) != len(entries) {
		t.Fatalf("%d lines for %d entries", len(got), len(entries))
	}
	if rest, _ := r.ReadString('\n'); rest != "rest" {
		t.Errorf("after the block: %q", rest)
	}
}

// shellJoin's quoting survives a POSIX shell unchanged.
func TestShellJoin(t *testing.T) {
	argv := []string{"/bin/echo", "plain", "it's", "two words", "$HOME", "", "a;b", "--x=1"}
	out, err := exec.Command("sh", "-c", shellJoin(argv)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(argv[1:], " ") + "\n"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// The coordinator's port is outside the ephemeral range and free.
func TestChoosePort(t *testing.T) {
	lo, hi := ephemeralRange()
	for range 20 {
		p, err := choosePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if p >= lo && p <= hi || p < 1024 {
			t.Fatalf("port %d inside the ephemeral range %d-%d or privileged", p, lo, hi)
		}
	}
}

// A Spec that cannot run fails before anything starts.
func TestSpecChecks(t *testing.T) {
	for _, c := range []struct {
		s    Spec
		want string
	}{
		{Spec{NProcPerNode: 1}, "no program"},
		{Spec{Argv: []string{"x"}}, "0 ranks per node"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, Secret: "short"}, "at least 16"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, NNodes: 2}, "CHOREO_SECRET"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, NNodes: 2, Secret: strings.Repeat("s", 16)}, "coordinator's host:port"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, NNodes: 2, NodeRank: 2}, "node rank 2 of 2"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, Env: []string{"NOEQUALS"}}, "KEY=VALUE"},
		{Spec{Argv: []string{"x"}, NProcPerNode: 1, Hosts: []string{"a b"}}, "host"},
	} {
		err := Run(c.s)
		if !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrBadArgument mentioning %q", c.s, err, c.want)
		}
	}
}
