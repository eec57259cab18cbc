package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// kids is the harness's one registry of child processes; KillAll on the
// way out ends them all.
var kids = rig.NewChildren()

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
	ranks   rig.Ranks
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
	run := "trust-" + rig.RandomHex(8)
	common := rig.WorldEnv(spec.n, hf.Name(), run, spec.transport)
	common = append(common, spec.env...)
	c := &cluster{spec: spec, hosts: hosts, run: run, started: time.Now()}
	for r := range spec.n {
		env := append([]string{"CHOREO_RANK=" + strconv.Itoa(r), "CHOREO_LOCAL_RANK=" + strconv.Itoa(r)}, common...)
		p, err := rig.StartProc(kids, fmt.Sprintf("rank %d", r), append([]string{h.demo, "node"}, spec.args...), env)
		if err != nil {
			c.ranks.Kill()
			return nil, fmt.Errorf("trust: %w", err)
		}
		c.ranks = append(c.ranks, p)
	}
	return c, nil
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

// saveLog writes text to the harness's log directory as name and returns
// the file's path ("" when it could not be written; the reason is logged).
func (h *harness) saveLog(name, text string) string {
	path, err := rig.SaveLog(h.logs, name, text)
	if err != nil {
		h.log.Warnw("cannot keep a try's output", "err", err)
	}
	return path
}
