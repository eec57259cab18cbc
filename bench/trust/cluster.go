package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// clusterSpec is one cluster of demo ranks on loopback: n processes of
// `demo node <args>`, over transport, with env added to every rank's
// environment.
type clusterSpec struct {
	n         int
	transport string
	args      []string
	env       []string
}

// cluster is the rank processes of one try, started by the harness as
// `demo launch` would start them (hostfile, CHOREO_* variables,
// GOMAXPROCS shared out), so that the harness knows each rank's pid and
// reads each rank's output itself. hosts are the control addresses by
// rank (the hostfile's); run is CHOREO_RUN.
type cluster struct {
	spec    clusterSpec
	hosts   []string
	run     string
	ranks   []*rig.Proc
	started time.Time
}

// startCluster starts spec's ranks with demo. If one cannot start, those
// started are killed.
func (h *harness) startCluster(spec clusterSpec) (*cluster, error) {
	hosts, err := freePorts(spec.n)
	if err != nil {
		return nil, err
	}
	hf, err := os.CreateTemp(h.tmp, "hosts-*.json")
	if err != nil {
		return nil, fmt.Errorf("trust: hostfile: %w", err)
	}
	b, _ := json.Marshal(hosts)
	_, err = hf.Write(b)
	if cerr := hf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("trust: hostfile: %w", err)
	}
	secret, run := randomHex(32), "trust-"+randomHex(8)
	common := []string{
		"CHOREO_WORLD_SIZE=" + strconv.Itoa(spec.n),
		"CHOREO_HOSTFILE=" + hf.Name(),
		"CHOREO_SECRET=" + secret,
		"CHOREO_RUN=" + run,
		"CHOREO_TRANSPORT=" + spec.transport,
	}
	if os.Getenv("GOMAXPROCS") == "" { // as demo launch shares the processors out
		common = append(common, "GOMAXPROCS="+strconv.Itoa(max(1, runtime.NumCPU()/spec.n)))
	}
	common = append(common, spec.env...)
	c := &cluster{spec: spec, hosts: hosts, run: run, started: time.Now()}
	for r := range spec.n {
		env := append([]string{"CHOREO_RANK=" + strconv.Itoa(r), "CHOREO_LOCAL_RANK=" + strconv.Itoa(r)}, common...)
		p, err := startProc(fmt.Sprintf("rank %d", r), append([]string{h.demo, "node"}, spec.args...), env)
		if err != nil {
			c.kill()
			return nil, err
		}
		c.ranks = append(c.ranks, p)
	}
	return c, nil
}

// kill ends every rank still running and waits for them (bounded).
func (c *cluster) kill() {
	for _, p := range c.ranks {
		_ = p.Signal(syscall.SIGKILL)
	}
	for _, p := range c.ranks {
		p.Wait(10 * time.Second)
	}
}

// waitAll waits until d has passed for every rank to end; it reports
// whether they all did.
func (c *cluster) waitAll(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for _, p := range c.ranks {
		if !p.Wait(time.Until(deadline)) {
			return false
		}
	}
	return true
}

// awaitAll waits, until d has passed, for a line that match accepts on
// every rank; it returns the lines by rank, or the first rank without one.
func (c *cluster) awaitAll(d time.Duration, match func(string) bool) ([]rig.Line, int, bool) {
	deadline := time.Now().Add(d)
	got := make([]rig.Line, len(c.ranks))
	for r, p := range c.ranks {
		l, ok := p.Await(time.Until(deadline), match)
		if !ok {
			return got, r, false
		}
		got[r] = l
	}
	return got, -1, true
}

// notReached says why rank r did not get to what (awaited for d): it
// exited, with its status and error line, or it was still going.
func (c *cluster) notReached(r int, what string, d time.Duration) string {
	p := c.ranks[r]
	if ended, code, _ := p.Exited(); ended {
		return fmt.Sprintf("rank %d exit %d before %s: %s", r, code, what, failureLine(p))
	}
	return fmt.Sprintf("rank %d: not at %s within %v: %s", r, what, d, p.LastLine(200))
}

// transcript is every rank's output, times since the cluster started.
func (c *cluster) transcript() string {
	var b strings.Builder
	for r, p := range c.ranks {
		b.WriteString(p.Transcript(c.started, fmt.Sprintf("[%d]", r)))
	}
	return b.String()
}

// freePorts picks n free ports on 127.0.0.1, all held open until every one
// is picked so that they differ.
func freePorts(n int) ([]string, error) {
	hosts := make([]string, n)
	for i := range hosts {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("trust: free port: %w", err)
		}
		defer func() { _ = l.Close() }()
		hosts[i] = l.Addr().String()
	}
	return hosts, nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// saveLog writes text to the harness's log directory as name and returns
// the file's path ("" when it could not be written; the reason is logged).
func (h *harness) saveLog(name, text string) string {
	if err := os.MkdirAll(h.logs, 0o755); err != nil {
		h.log.Warnw("cannot keep a try's output", "err", err)
		return ""
	}
	path := filepath.Join(h.logs, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		h.log.Warnw("cannot keep a try's output", "err", err)
		return ""
	}
	return path
}
