package main

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/choreo-gpu/choreo/bench/internal/rig"
)

// basePort is the control port of local rank 0 on each host; local rank
// l listens at basePort+l. Every host has its own port space, so the
// ports are fixed.
const basePort = 29400

// clusterSpec is one group of demo ranks over the network's hosts:
// perHost ranks on each host, host h holding ranks h*perHost to
// (h+1)*perHost-1 (local rank = rank mod perHost); transport is
// CHOREO_TRANSPORT ("" leaves it unset); env is added to every rank's
// environment; flat gives every rank a host identity of its own
// (CHOREO_HOST_ID); args follow `demo --verbose node`.
type clusterSpec struct {
	perHost   int
	transport string
	flat      bool
	env       []string
	args      []string
}

// cluster is the rank processes of one group, started by the harness as
// a launcher on each host would start them, each inside its host's
// network namespace and a UTS namespace of its own named as the host.
type cluster struct {
	spec    clusterSpec
	ranks   rig.Ranks
	hostOf  []int
	started time.Time
}

// startCluster starts spec's ranks on every host of h's network. If one
// cannot start, those started are killed.
func (h *harness) startCluster(spec clusterSpec) (*cluster, error) {
	hosts := h.net.hosts
	n := hosts * spec.perHost
	addrs := make([]string, n)
	for r := range addrs {
		addrs[r] = net.JoinHostPort(h.net.addr(r/spec.perHost), strconv.Itoa(basePort+r%spec.perHost))
	}
	hostfile, _ := json.Marshal(addrs) // CHOREO_HOSTFILE takes the list itself
	h.runs++
	common := rig.WorldEnv(n, string(hostfile), "hosts-"+h.net.run+"-"+strconv.Itoa(h.runs), spec.transport)
	common = append(append(common, h.cfg.env...), spec.env...)
	c := &cluster{spec: spec, started: time.Now()}
	for r := range n {
		host := r / spec.perHost
		env := append([]string{"CHOREO_RANK=" + strconv.Itoa(r), "CHOREO_LOCAL_RANK=" + strconv.Itoa(r%spec.perHost)}, common...)
		if spec.flat {
			env = append(env, "CHOREO_HOST_ID="+h.net.hostname(host)+"-rank"+strconv.Itoa(r))
		}
		argv := h.net.onHost(host, append([]string{h.demo, "--verbose", "node"}, spec.args...)...)
		p, err := rig.StartProc(kids, fmt.Sprintf("rank %d (host %d)", r, host), argv, env)
		if err != nil {
			c.ranks.Kill()
			return nil, fmt.Errorf("hosts: %w", err)
		}
		c.ranks = append(c.ranks, p)
		c.hostOf = append(c.hostOf, host)
	}
	return c, nil
}

// failure says what went wrong with rank r: its exit and last line, or
// that it is still running.
func (c *cluster) failure(r int) string {
	p := c.ranks[r]
	if ended, code, _ := p.Exited(); ended {
		return fmt.Sprintf("rank %d (host %d) exit %d: %s", r, c.hostOf[r], code, lastLine(p, 300))
	}
	return fmt.Sprintf("rank %d (host %d) still running: %s", r, c.hostOf[r], lastLine(p, 300))
}

// firstFailure is the first rank that exited with a status other than 0,
// or -1.
func (c *cluster) firstFailure() int {
	for r, p := range c.ranks {
		if ended, code, _ := p.Exited(); ended && code != 0 {
			return r
		}
	}
	return -1
}

// joinedTransport matches the data plane Join reports on the "joined" log
// line of a rank run with --verbose.
var joinedTransport = regexp.MustCompile(`\bjoined\b.*"transport": "([^"]*)"`)

// transports are the distinct data planes the ranks said they joined
// with, "+"-separated ("?" when no rank said).
func (c *cluster) transports() string {
	var got []string
	for _, p := range c.ranks {
		for _, l := range p.Lines() {
			if m := joinedTransport.FindStringSubmatch(l.Text); m != nil && !slices.Contains(got, m[1]) {
				got = append(got, m[1])
			}
		}
	}
	if len(got) == 0 {
		return "?"
	}
	slices.Sort(got)
	return strings.Join(got, "+")
}

// joined is what the ranks joined with: the data planes and, where Join
// reports each pair's carrier, the carriers within and across hosts.
func (c *cluster) joined() string {
	t := c.transports()
	if pc := c.pairCarriers(); pc != "-" {
		t += " (" + pc + ")"
	}
	return t
}

// joinedLinks matches the carrier of each pair, "0:self 1:shm 2:tcp", on
// the "joined" line, where Join reports one.
var joinedLinks = regexp.MustCompile(`\bjoined\b.*"links": "([^"]*)"`)

// pairCarriers says which carriers linked pairs of ranks on one host and
// pairs across hosts, from every rank's "joined" line: "same host shm,
// across tcp"; "-" where no rank reported its links.
func (c *cluster) pairCarriers() string {
	var same, across []string
	seen := false
	for r, p := range c.ranks {
		for _, l := range p.Lines() {
			m := joinedLinks.FindStringSubmatch(l.Text)
			if m == nil {
				continue
			}
			seen = true
			for _, f := range strings.Fields(m[1]) {
				k, carrier, ok := strings.Cut(f, ":")
				peer, err := strconv.Atoi(k)
				if !ok || err != nil || peer == r || peer < 0 || peer >= len(c.hostOf) {
					continue
				}
				list := &across
				if c.hostOf[peer] == c.hostOf[r] {
					list = &same
				}
				if !slices.Contains(*list, carrier) {
					*list = append(*list, carrier)
				}
			}
		}
	}
	if !seen {
		return "-"
	}
	name := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		slices.Sort(l)
		return strings.Join(l, "+")
	}
	return "same host " + name(same) + ", across " + name(across)
}

// transcript is every rank's output, times since the cluster started.
func (c *cluster) transcript() string {
	var b strings.Builder
	for r, p := range c.ranks {
		for _, l := range p.Lines() {
			fmt.Fprintf(&b, "%+9.3fs [%d h%d] %s\n", l.At.Sub(c.started).Seconds(), r, c.hostOf[r], l.Text)
		}
		if ended, code, at := p.Exited(); ended {
			fmt.Fprintf(&b, "%+9.3fs [%d h%d] (exit %d)\n", at.Sub(c.started).Seconds(), r, c.hostOf[r], code)
		}
	}
	return b.String()
}
