package test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/internal/testenv"
)

// launchBins is choreorun and the README's program across processes
// (testdata/allreduce), built once, beside the demo, with the race
// detector when the tests run with it; plain is the program without it
// (a race-built process needs several times the memory, and the test of
// many ranks starts hundreds).
var launchBins struct {
	once, plainOnce        sync.Once
	choreorun, prog, plain string
	err, plainErr          error
}

// binaries builds (once) and returns choreorun and the program.
func binaries(t *testing.T) (choreorun, prog string) {
	t.Helper()
	b := &launchBins
	b.once.Do(func() {
		dir := filepath.Join(filepath.Dir(demo), "launch")
		args := []string{"build", "-o", dir + "/"}
		if raceOn {
			args = append(args, "-race")
		}
		b.choreorun, b.prog = filepath.Join(dir, "choreorun"), filepath.Join(dir, "allreduce")
		b.err = goBuild(append(args, "../cmd/choreorun", "./testdata/allreduce")...)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.choreorun, b.prog
}

// plainProg builds (once) the program without the race detector.
func plainProg(t *testing.T) string {
	t.Helper()
	b := &launchBins
	b.plainOnce.Do(func() {
		b.plain = filepath.Join(filepath.Dir(demo), "plain", "allreduce")
		b.plainErr = goBuild("build", "-o", b.plain, "./testdata/allreduce")
	})
	if b.plainErr != nil {
		t.Fatal(b.plainErr)
	}
	return b.plain
}

func goBuild(args ...string) error {
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// proc is a process a test started, its output kept.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	done           chan struct{}
	err            error
}

// startProc starts argv with env added, in a process group of its own
// that the test kills at its end; it is bounded by d (then SIGKILLed).
func startProc(t *testing.T, d time.Duration, env []string, argv ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(argv[0], argv[1:]...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(d, func() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) })
	go func() {
		p.err = p.cmd.Wait()
		timer.Stop()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	})
	return p
}

// wait waits for p's end (bounded by startProc's d and WaitDelay) and
// returns its exit status.
func (p *proc) wait() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

func (p *proc) String() string {
	return fmt.Sprintf("%v: %v\nstdout:\n%s\nstderr:\n%s", p.cmd.Args, p.err, p.stdout.String(), p.stderr.String())
}

// wantRanks fails t unless out has rank r's line of a correct all-reduce
// over size ranks, for each r in ranks, read from source's variables.
func wantRanks(t *testing.T, out string, size int, source string, tagged bool, ranks ...int) {
	t.Helper()
	sum := size * (size + 1) / 2
	for _, r := range ranks {
		want := fmt.Sprintf("rank %d of %d got %d x 1024 from %s\n", r, size, sum, source)
		if tagged {
			want = fmt.Sprintf("[%*d] ", len(strconv.Itoa(size-1)), r) + want
		}
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// coordinatorPort is a free port on 127.0.0.1 outside the kernel's
// ephemeral range (so no port the ranks bind or dial takes it first).
func coordinatorPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		n, _ := rand.Int(rand.Reader, big.NewInt(10000))
		p := 20000 + int(n.Int64())
		if l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p)); err == nil {
			_ = l.Close()
			return p
		}
	}
	t.Fatal("no free port in 20000-29999")
	return 0
}

func secretHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The README's program under `choreorun -np 4` (mpirun's spelling).
func TestChoreorunFourRanks(t *testing.T) {
	choreorun, prog := binaries(t)
	p := startProc(t, 3*time.Minute, nil, choreorun, "-np", "4", "--tag-output", prog)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p)
	}
	wantRanks(t, p.stdout.String(), 4, "choreo", true, 0, 1, 2, 3)
}

// With --max-restarts 1, a rank that dies after its group formed ends the
// first start (the others fail with the lost peer); choreorun says it
// restarts every rank, and the second start (CHOREO_RESTART_COUNT 1)
// all-reduces correctly and exits 0.
func TestChoreorunMaxRestarts(t *testing.T) {
	choreorun, prog := binaries(t)
	p := startProc(t, 3*time.Minute, nil, choreorun, "-n", "3", "--max-restarts", "1", "--tag-output",
		"--env", "ALLREDUCE_DIE_AFTER_JOIN=2", prog)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p)
	}
	if want := regexp.MustCompile(`(?m)^choreorun: restart 1 of 1, every rank: rank \d exited 1 after `); !want.MatchString(p.stderr.String()) {
		t.Errorf("no restart line matching %v\n%s", want, p)
	}
	if n := strings.Count(p.stderr.String(), "[2] allreduce: dying on purpose"); n != 1 {
		t.Errorf("rank 2 died %d times, want once (on the first start)\n%s", n, p)
	}
	wantRanks(t, p.stdout.String(), 3, "choreo", true, 0, 1, 2)
}

// Two choreoruns on one machine, each a node of two ranks, as torchrun's
// nodes meet: the same coordinator and secret, each its node rank.
func TestChoreorunTwoNodes(t *testing.T) {
	choreorun, prog := binaries(t)
	coord := "127.0.0.1:" + strconv.Itoa(coordinatorPort(t))
	env := []string{"CHOREO_SECRET=" + secretHex(t)}
	var nodes []*proc
	for node := range 2 {
		nodes = append(nodes, startProc(t, 3*time.Minute, env, choreorun, "--nnodes", "2", "--nproc-per-node", "2",
			"--node-rank", strconv.Itoa(node), "--coordinator", coord, "--tag-output", prog))
	}
	for node, p := range nodes {
		if code := p.wait(); code != 0 {
			t.Fatalf("node %d: exit status %d\n%s", node, code, p)
		}
		wantRanks(t, p.stdout.String(), 4, "choreo", true, 2*node, 2*node+1)
	}
}

// fakeSSH writes a stand-in for ssh: it logs its arguments to log and
// runs the command line on this machine, without CHOREO_SECRET in its
// environment (as a remote host would be), so the secret must come on
// its standard input.
func fakeSSH(t *testing.T) (script, log string) {
	t.Helper()
	dir := t.TempDir()
	script, log = filepath.Join(dir, "ssh"), filepath.Join(dir, "ssh.log")
	body := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> " + log + "\nhost=$1\nshift\nexec env -u CHOREO_SECRET /bin/sh -c \"$*\"\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, log
}

// `choreorun --hosts a,b` starts each host's node over ssh (a stand-in
// that runs it here); the secret never appears on a command line.
func TestChoreorunOverSSH(t *testing.T) {
	choreorun, prog := binaries(t)
	ssh, log := fakeSSH(t)
	secret := secretHex(t)
	p := startProc(t, 3*time.Minute, []string{"CHOREO_SECRET=" + secret}, choreorun, "-n", "4",
		"--hosts", "127.0.0.1,node-b", "--ssh", ssh, "--tag-output", "-x", "ALLREDUCE_MARK=1", prog)
	if code := p.wait(); code != 0 {
		t.Fatalf("exit status %d\n%s", code, p)
	}
	wantRanks(t, p.stdout.String(), 4, "choreo", true, 0, 1, 2, 3)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	calls := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(calls) != 2 || !strings.HasPrefix(calls[0], "-o BatchMode=yes 127.0.0.1 ") && !strings.HasPrefix(calls[0], "127.0.0.1 ") ||
		!strings.Contains(strings.Join(calls, "\n"), "node-b ") {
		t.Errorf("ssh calls:\n%s\nwant one to 127.0.0.1, then one to node-b", b)
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("the secret is on an ssh command line:\n%s", b)
	}
}

// The README's program joins from torchrun's, Open MPI's and Slurm's
// variables, set here on plain processes as those launchers would.
func TestJoinFromOtherLaunchersVariables(t *testing.T) {
	_, prog := binaries(t)
	const n = 2
	for _, c := range []struct {
		source string
		vars   func(rank int, coord string) []string
	}{
		{"torchrun", func(r int, coord string) []string {
			host, port, _ := net.SplitHostPort(coord)
			return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(n), "LOCAL_RANK=" + strconv.Itoa(r),
				"MASTER_ADDR=" + host, "MASTER_PORT=" + port}
		}},
		{"openmpi", func(r int, coord string) []string {
			return []string{"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=" + strconv.Itoa(n),
				"OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r), "CHOREO_COORDINATOR=" + coord}
		}},
		{"slurm", func(r int, coord string) []string {
			host, port, _ := net.SplitHostPort(coord)
			return []string{"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_NTASKS=" + strconv.Itoa(n),
				"SLURM_LOCALID=" + strconv.Itoa(r), "SLURM_JOB_ID=77", "MASTER_ADDR=" + host, "MASTER_PORT=" + port}
		}},
	} {
		t.Run(c.source, func(t *testing.T) {
			coord := "127.0.0.1:" + strconv.Itoa(coordinatorPort(t))
			secret := "CHOREO_SECRET=" + secretHex(t)
			var ranks []*proc
			for r := range n {
				ranks = append(ranks, startProc(t, 3*time.Minute, append(c.vars(r, coord), secret), prog))
			}
			for r, p := range ranks {
				if code := p.wait(); code != 0 {
					t.Fatalf("rank %d: exit status %d\n%s", r, code, p)
				}
				wantRanks(t, p.stdout.String(), n, c.source, false, r)
			}
		})
	}
	t.Run("openmpi without a coordinator", func(t *testing.T) {
		p := startProc(t, time.Minute, []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
			"CHOREO_SECRET=" + secretHex(t)}, prog)
		if code := p.wait(); code != 1 || !strings.Contains(p.stderr.String(), "no coordinator: set CHOREO_COORDINATOR") ||
			!strings.Contains(p.stderr.String(), "-x CHOREO_COORDINATOR") {
			t.Errorf("exit status %d, want 1 and an error naming CHOREO_COORDINATOR\n%s", code, p)
		}
	})
}

// summaryLine is the launcher's verdict: the last line of its standard
// error, the only one choreorun writes there itself.
func summaryLine(t *testing.T, p *proc) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
	var own []string
	for _, l := range lines {
		if strings.HasPrefix(l, "choreorun: ") {
			own = append(own, l)
		}
	}
	if len(own) != 1 || own[0] != lines[len(lines)-1] {
		t.Fatalf("want one choreorun line, the last one, got %q\n%s", own, p)
	}
	if len(own[0]) > 200 {
		t.Errorf("summary of %d characters, want at most 200: %q", len(own[0]), own[0])
	}
	return own[0]
}

// A rank failing at start (before it joins) stops the launch: choreorun
// exits 1 with one line of at most 200 characters naming the rank, its
// status and its last line, cut; no rank is left.
func TestChoreorunRankFailingAtStart(t *testing.T) {
	choreorun, prog := binaries(t)
	const n = 12
	pids := t.TempDir()
	p := startProc(t, 3*time.Minute, nil, choreorun, "-n", strconv.Itoa(n), "-x", "ALLREDUCE_FAIL_RANK=5",
		"--env", "ALLREDUCE_PID_DIR="+pids, prog)
	if code := p.wait(); code != 1 {
		t.Fatalf("exit status %d, want 1\n%s", code, p)
	}
	line := summaryLine(t, p)
	want := regexp.MustCompile(`^choreorun: rank 5 exited 1 after [0-9.]+m?s: allreduce: failing on purpose before the join: x+\.\.\.(; \d+ more failed)?; \d+ others stopped$`)
	if !want.MatchString(line) {
		t.Errorf("summary %q does not match %v", line, want)
	}
	waitPidsGone(t, pids, n)
}

// waitPidsGone fails t unless every pid the ranks wrote to dir is gone
// within a few seconds.
func waitPidsGone(t *testing.T, dir string, n int) {
	t.Helper()
	files, _ := os.ReadDir(dir)
	if len(files) == 0 || len(files) > n {
		t.Errorf("%d pid files for %d ranks", len(files), n)
	}
	end := time.Now().Add(10 * time.Second)
	for _, f := range files {
		b, _ := os.ReadFile(filepath.Join(dir, f.Name()))
		pid, _ := strconv.Atoi(string(b))
		for pid > 0 && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			if time.Now().After(end) {
				t.Fatalf("rank %s (pid %d) still running after the launch ended", f.Name(), pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// zombie reports whether pid is a zombie (ended, not yet reaped).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// Many ranks on this host: none fails to bind a port (only rank 0's is
// chosen up front, outside the ephemeral range; every other rank binds
// its own), and the launch ends with every rank's result or one summary
// line. 64 ranks with CHOREO_TEST_FULL=1, else 8; CHOREO_TEST_RANKS=N
// runs N (256 took about a minute on 2 cores, and several GiB of memory:
// too much beside the rest of the suite).
func TestChoreorunManyRanksBindNoPortTaken(t *testing.T) {
	choreorun, _ := binaries(t)
	prog := plainProg(t)
	n := 8
	if testenv.Full() {
		n = 64
	}
	if v, err := strconv.Atoi(os.Getenv("CHOREO_TEST_RANKS")); err == nil && v > 0 {
		n = v
	}
	pids := t.TempDir()
	p := startProc(t, 8*time.Minute, []string{"CHOREO_JOIN_TIMEOUT=6m"}, choreorun, "-n", strconv.Itoa(n),
		"--env", "ALLREDUCE_PID_DIR="+pids, prog)
	code := p.wait()
	all := p.stdout.String() + p.stderr.String()
	if strings.Contains(all, "address already in use") {
		t.Errorf("a rank could not bind:\n%s", p)
	}
	if code != 0 {
		line := summaryLine(t, p)
		t.Logf("%d ranks did not all finish (exit status %d): %s", n, code, line)
	} else {
		got := strings.Count(p.stdout.String(), fmt.Sprintf(" of %d got %d x 1024", n, n*(n+1)/2))
		if got != n {
			t.Errorf("%d of %d ranks reported a correct all-reduce\n%s", got, n, p)
		}
	}
	waitPidsGone(t, pids, n)
}

// A command line choreorun cannot parse: one line and a hint, exit 2.
func TestChoreorunParseError(t *testing.T) {
	choreorun, _ := binaries(t)
	for _, args := range [][]string{{"-n", "x", "prog"}, {"--no-such-flag", "prog"}, {"-n", "2"}, {"-n", "3", "--nnodes", "2", "prog"}} {
		p := startProc(t, time.Minute, nil, append([]string{choreorun}, args...)...)
		code := p.wait()
		lines := strings.Split(strings.TrimRight(p.stderr.String(), "\n"), "\n")
		if code != 2 || len(lines) != 2 || !strings.HasPrefix(lines[0], "choreorun: ") ||
			lines[1] != "Run 'choreorun --help' for usage." || p.stdout.Len() != 0 {
			t.Errorf("%v: exit status %d, want 2 with one line and the hint\n%s", args, code, p)
		}
	}
}

// Over ssh, a rank failing on the second host stops both hosts' ranks, and
// choreorun's one line names the node and what its choreorun said.
func TestChoreorunOverSSHRankFails(t *testing.T) {
	testenv.Sliced(t, false) // a failing rank is the plain run's in TestChoreorunRankFailingAtStart
	choreorun, prog := binaries(t)
	ssh, _ := fakeSSH(t)
	pids := t.TempDir()
	p := startProc(t, 3*time.Minute, nil, choreorun, "-n", "4", "--hosts", "127.0.0.1,node-b", "--ssh", ssh,
		"-x", "ALLREDUCE_FAIL_RANK=3", "--env", "ALLREDUCE_PID_DIR="+pids, prog)
	if code := p.wait(); code != 1 {
		t.Fatalf("exit status %d, want 1\n%s", code, p)
	}
	line := summaryLine(t, p)
	want := regexp.MustCompile(`^choreorun: node 1 exited 1 after [0-9.]+m?s: rank 3 exited 1 after [0-9.]+m?s: allreduce: failing on purpose before the join: x+\.\.\.(; \d+ more failed)?; 1 other stopped$`)
	if !want.MatchString(line) {
		t.Errorf("summary %q does not match %v", line, want)
	}
	waitPidsGone(t, pids, 4)
}

// Ctrl-C (SIGINT) stops every rank: choreorun exits 130 and leaves none.
func TestChoreorunInterrupted(t *testing.T) {
	choreorun, _ := binaries(t)
	pids := t.TempDir()
	p := startProc(t, 2*time.Minute, nil, choreorun, "-n", "3", "--grace", "1s", "--",
		"sh", "-c", `echo $$ > `+pids+`/$CHOREO_RANK; echo started; exec sleep 60`)
	for end := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if files, _ := os.ReadDir(pids); len(files) == 3 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the ranks did not start\n%s", p)
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 130 {
		t.Errorf("exit status %d, want 130\n%s", code, p)
	}
	if line := summaryLine(t, p); line != "choreorun: interrupted (interrupt); 3 ranks stopped" {
		t.Errorf("summary %q", line)
	}
	waitPidsGone(t, pids, 3)
}
