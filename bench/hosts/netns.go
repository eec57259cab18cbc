package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// nsPrefix leads the name of every network namespace the harness makes;
// the run's suffix follows, so that runs never share one and -clean can
// find what a killed run left.
const nsPrefix = "choreo-hosts-"

// ipTimeout bounds one ip or tc command.
const ipTimeout = 30 * time.Second

// network is the hosts of one run: a network namespace per host, each
// with its own address (10.99.0.<i+1>/24 on its eth0) and loopback, and a
// hub namespace holding a bridge; host i's eth0 is one end of a veth pair
// whose other end, v<i>, is a port of the bridge. A rate caps both
// directions of every host's link: tbf on eth0 (what the host sends) and
// on v<i> (what it receives), as a full-duplex NIC on a switch. Nothing is
// made in the root namespace, and deleting the namespaces deletes
// everything (a veth pair goes with either end's namespace).
//
// close deletes every namespace setup made; it is idempotent and safe
// to call from a signal handler's goroutine while a setup runs (a
// namespace being made when close runs is deleted too).
type network struct {
	run   string // the run's suffix
	hosts int
	log   *zap.SugaredLogger

	mu      sync.Mutex
	made    []string // namespaces created, in order
	closed  bool
	current rate
}

// newNetwork is the network of hosts hosts for run (a short suffix unique
// to this invocation); setup makes it, close deletes it.
func newNetwork(run string, hosts int, log *zap.SugaredLogger) *network {
	return &network{run: run, hosts: hosts, log: log, current: rate{name: "off"}}
}

// hub is the hub namespace's name.
func (n *network) hub() string { return nsPrefix + n.run + "-hub" }

// ns is host i's namespace.
func (n *network) ns(i int) string { return nsPrefix + n.run + "-h" + strconv.Itoa(i) }

// hostname is host i's host name (its UTS namespace's).
func (n *network) hostname(i int) string { return "host" + strconv.Itoa(i) }

// addr is host i's address.
func (n *network) addr(i int) string { return "10.99.0." + strconv.Itoa(i+1) }

// onHost is the command line that runs argv on host i: in its network
// namespace (ip netns exec), in a UTS namespace of its own (unshare) whose
// host name is the host's, set before argv is executed in its place.
// ip, unshare and sh each exec the next, so the process started is argv's
// in the end, with the same pid.
func (n *network) onHost(i int, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", n.ns(i), "unshare", "--uts",
		"sh", "-c", `hostname "$1" && shift && exec "$@"`, "sh", n.hostname(i)}, argv...)
}

// port is host i's bridge port in the hub.
func port(i int) string { return "v" + strconv.Itoa(i) }

// setup makes the namespaces, the bridge and the links, with no cap. On
// failure, close deletes what it made.
func (n *network) setup() error {
	if n.hosts < 1 || n.hosts > 250 {
		return fmt.Errorf("hosts: %d hosts: want 1 to 250", n.hosts)
	}
	if err := n.addNS(n.hub()); err != nil {
		return err
	}
	hub := n.hub()
	steps := [][]string{
		{"ip", "-n", hub, "link", "set", "lo", "up"},
		{"ip", "-n", hub, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", hub, "link", "set", "br0", "up"},
	}
	if err := runAll(steps); err != nil {
		return err
	}
	for i := range n.hosts {
		ns := n.ns(i)
		if err := n.addNS(ns); err != nil {
			return err
		}
		steps := [][]string{
			{"ip", "-n", hub, "link", "add", port(i), "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"ip", "-n", hub, "link", "set", port(i), "master", "br0"},
			{"ip", "-n", hub, "link", "set", port(i), "up"},
			{"ip", "-n", ns, "addr", "add", n.addr(i) + "/24", "dev", "eth0"},
			{"ip", "-n", ns, "link", "set", "eth0", "up"},
			{"ip", "-n", ns, "link", "set", "lo", "up"},
		}
		if err := runAll(steps); err != nil {
			return err
		}
	}
	n.log.Infow("hosts made", "hosts", n.hosts, "namespaces", n.names())
	return nil
}

// addNS makes namespace name and records it for close. It holds the lock
// across the command, so that a close racing with it waits and deletes
// the namespace too.
func (n *network) addNS(name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return fmt.Errorf("hosts: interrupted")
	}
	n.made = append(n.made, name)
	return runCmd("ip", "netns", "add", name)
}

// names are the namespaces made so far.
func (n *network) names() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.made...)
}

// setRate caps every host's link at r in both directions (r off: no cap).
func (n *network) setRate(r rate, burst time.Duration) error {
	var steps [][]string
	for i := range n.hosts {
		for _, end := range []struct{ ns, dev string }{{n.ns(i), "eth0"}, {n.hub(), port(i)}} {
			if r.bits == 0 {
				if n.current.bits != 0 {
					steps = append(steps, []string{"tc", "-n", end.ns, "qdisc", "del", "dev", end.dev, "root"})
				}
				continue
			}
			steps = append(steps, append([]string{"tc", "-n", end.ns}, r.tbfArgs(end.dev, burst)...))
		}
	}
	if err := runAll(steps); err != nil {
		return err
	}
	n.current = r
	return nil
}

// close deletes every namespace made, hosts before the hub; the first
// failure is returned, after every deletion was tried. Processes still in
// a namespace keep it alive unseen until they exit: the harness ends its
// ranks before.
func (n *network) close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	made := n.made
	n.mu.Unlock()
	var errs []error
	for i := len(made) - 1; i >= 0; i-- {
		if err := runCmd("ip", "netns", "del", made[i]); err != nil && nsExists(made[i]) {
			errs = append(errs, err)
		}
	}
	if len(made) > 0 {
		n.log.Infow("hosts deleted", "namespaces", made, "failed", len(errs))
	}
	return errors.Join(errs...)
}

// nsExists reports whether a network namespace named name is listed.
func nsExists(name string) bool {
	list, err := listNS()
	return err != nil || slices.Contains(list, name)
}

// listNS is `ip netns list`'s names.
func listNS() ([]string, error) {
	out, err := output("ip", "netns", "list")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			names = append(names, f[0])
		}
	}
	return names, nil
}

// cleanStale deletes the namespaces an earlier run of the harness left
// (its name starts with nsPrefix) in which no process runs; it returns
// those deleted.
func cleanStale() ([]string, error) {
	list, err := listNS()
	if err != nil {
		return nil, err
	}
	var deleted []string
	var errs []error
	for _, name := range list {
		if !strings.HasPrefix(name, nsPrefix) {
			continue
		}
		pids, err := output("ip", "netns", "pids", name)
		if err != nil || strings.TrimSpace(pids) != "" {
			continue // in use, or unreadable: leave it
		}
		if err := runCmd("ip", "netns", "del", name); err != nil {
			errs = append(errs, err)
			continue
		}
		deleted = append(deleted, name)
	}
	return deleted, errors.Join(errs...)
}

// runAll runs each command in turn, stopping at the first failure.
func runAll(cmds [][]string) error {
	for _, c := range cmds {
		if err := runCmd(c...); err != nil {
			return err
		}
	}
	return nil
}

// runCmd runs argv (bounded by ipTimeout); its output goes in the error.
func runCmd(argv ...string) error {
	_, err := output(argv...)
	return err
}

// output runs argv (bounded by ipTimeout) and returns its stdout.
func output(argv ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ipTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hosts: %s: %w: %s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
