package launch

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// reportTimeout bounds the wait for node 0's report of the coordinator's
// address (an SSH connection, a process start and a port probe).
const reportTimeout = 2 * time.Minute

// VerdictPrefix leads the one line in which a node started over SSH
// (choreorun) gives its verdict on its standard error; the launcher that
// started it takes that line as the node's, instead of passing it on.
const VerdictPrefix = "choreorun: "

// runHosts runs node i on s.Hosts[i] over SSH and supervises the SSH
// commands: node 0 first, which reports the coordinator's address, then
// the others. Stopping a node closes its command's standard input (its
// choreorun stops its ranks when that ends); killing one kills the SSH
// command.
func runHosts(s Spec) error {
	if s.Secret == "" {
		s.Secret = randomHex(32)
	}
	if s.Run == "" {
		s.Run = "run-" + randomHex(6)
	}
	if len(s.Remote) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("launch: the remote command: %w", err)
		}
		s.Remote = []string{exe}
	}
	coord := s.Coordinator
	if coord == "" {
		coord = hostOf(s.Hosts[0]) + ":0"
	}
	block := envBlock(append([]string{EnvSecret + "=" + s.Secret, EnvRun + "=" + s.Run}, s.Env...))
	g := newGroup(len(s.Hosts), s.Grace, 0)
	term, termErr := &sink{dst: s.Stdout}, &sink{dst: s.Stderr}
	verdicts := make([]string, len(s.Hosts))
	report := make(chan string, 1)
	start := func(node int, coord string) error {
		m := &member{id: node, out: newLineWriter(term, ""), errw: newLineWriter(termErr, "")}
		if node == 0 {
			reported := false
			m.out.divert = func(line []byte) bool {
				if reported || !bytes.HasPrefix(line, []byte(reportPrefix)) {
					return false
				}
				reported = true
				report <- string(bytes.TrimPrefix(line, []byte(reportPrefix)))
				return true
			}
		}
		m.errw.divert = func(line []byte) bool {
			if !bytes.HasPrefix(line, []byte(VerdictPrefix)) {
				return false
			}
			verdicts[node] = string(bytes.TrimPrefix(line, []byte(VerdictPrefix)))
			return true
		}
		argv := append(append([]string(nil), s.SSH[1:]...), s.Hosts[node], shellJoin(s.nodeArgv(node, coord)))
		m.cmd = exec.Command(s.SSH[0], argv...)
		in, err := m.cmd.StdinPipe()
		if err != nil {
			return err
		}
		m.cmd.Stdout, m.cmd.Stderr = m.out, m.errw
		m.stop = func(sig syscall.Signal) {
			if sig == syscall.SIGKILL {
				_ = syscall.Kill(-m.cmd.Process.Pid, sig)
				return
			}
			_ = in.Close() // its choreorun sees the end of its input and stops its ranks
		}
		if err := g.start(m); err != nil {
			return err
		}
		go func() { _, _ = io.WriteString(in, block) }() // the pipe holds it; an early exit ends the write
		s.Log.Info("node started", zap.Int("node", node), zap.String("host", s.Hosts[node]))
		return nil
	}
	if err := start(0, coord); err != nil {
		return fmt.Errorf("launch: node 0 on %s: %w", s.Hosts[0], err)
	}
	if hasNoPort(coord) {
		timer := time.NewTimer(reportTimeout)
		select {
		case coord = <-report:
		case e := <-g.exits: // node 0 ended before it reported: supervise names it
			g.exits <- e
		case sig := <-s.Signals:
			g.abort()
			return &ExitError{Code: 130, msg: fmt.Sprintf("interrupted (%v) while node 0 started", sig), kind: ErrInterrupted}
		case <-timer.C:
			g.abort()
			return &ExitError{Code: 1, msg: cut(fmt.Sprintf("node 0 on %s reported no coordinator within %v", s.Hosts[0], reportTimeout), MaxSummary), kind: ErrTimeout}
		}
		timer.Stop()
	}
	if !hasNoPort(coord) {
		for node := 1; node < len(s.Hosts); node++ {
			if err := start(node, coord); err != nil {
				g.abort()
				return fmt.Errorf("launch: node %d on %s: %w", node, s.Hosts[node], err)
			}
		}
	}
	if s.Started != nil {
		s.Started(g.pids())
	}
	o := g.supervise(s.Signals, deadline(s.Deadline))
	return verdict(o, "node", s.Deadline, 0, func(e exit) string {
		if v := verdicts[e.m.id]; v != "" {
			return v
		}
		return e.m.errw.Last()
	})
}

// nodeArgv is the command line that runs node i on its host.
func (s Spec) nodeArgv(node int, coord string) []string {
	a := append(append([]string(nil), s.Remote...), "--agent",
		"--nnodes", strconv.Itoa(s.NNodes), "--node-rank", strconv.Itoa(node),
		"--nproc-per-node", strconv.Itoa(s.NProcPerNode), "--coordinator", coord,
		"--grace", s.Grace.String())
	if s.TagOutput {
		a = append(a, "--tag-output")
	}
	if s.LogDir != "" {
		a = append(a, "--log-dir", s.LogDir)
	}
	if s.Deadline > 0 {
		a = append(a, "--deadline", s.Deadline.String())
	}
	if s.PeerLostExit != 0 {
		a = append(a, "--peer-lost-exit", strconv.Itoa(s.PeerLostExit))
	}
	return append(append(a, "--"), s.Argv...)
}

// hostOf is an SSH destination's host: "user@host" without "user@".
func hostOf(dest string) string {
	if i := strings.LastIndexByte(dest, '@'); i >= 0 {
		return dest[i+1:]
	}
	return dest
}

// shellJoin quotes argv for a POSIX shell (SSH runs its command line
// through the remote user's shell).
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// envBlock encodes entries for a node's standard input: one quoted
// "KEY=VALUE" a line, then an empty line.
func envBlock(entries []string) string {
	var b strings.Builder
	for _, e := range entries {
		b.WriteString(strconv.Quote(e))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return b.String()
}

// RunNode runs one node of a launch started on another host (choreorun
// --agent): it reads the secret, the run and the variables from in (what
// runHosts writes), reports a coordinator port it chooses on s.Stdout,
// and runs s; the end of in stops the launch, as a signal would.
func RunNode(s Spec, in io.Reader) error {
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("launch: node: read the launch's variables: %w", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			break
		}
		e, err := strconv.Unquote(line)
		if err != nil {
			return fmt.Errorf("launch: node: variable line %q: %w", line, err)
		}
		switch k, v, _ := strings.Cut(e, "="); k {
		case EnvSecret:
			s.Secret = v
		case EnvRun:
			s.Run = v
		default:
			s.Env = append(s.Env, e)
		}
	}
	sigs := make(chan os.Signal, 3)
	if s.Signals == nil {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(sigs)
	} else {
		go func() {
			for sig := range s.Signals {
				sigs <- sig
			}
		}()
	}
	go func() {
		_, _ = io.Copy(io.Discard, r)
		sigs <- syscall.SIGHUP // the launcher closed our input, or is gone
	}()
	s.Signals, s.agent = sigs, true
	return Run(s)
}
