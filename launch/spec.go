package launch

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Spec is one launch: what to run, how many ranks, where, and what they
// get. Run reads it; the zero values of the optional fields are the
// defaults named.
type Spec struct {
	// Argv is the program each rank runs and its arguments (searched in
	// PATH when it has no slash).
	Argv []string
	// NProcPerNode is the number of ranks on each node (at least 1).
	NProcPerNode int
	// NNodes is the number of nodes (hosts, or launchers acting as hosts);
	// default 1. With more than one, each node's ranks are
	// NodeRank*NProcPerNode and on, and every node needs the same
	// Coordinator and the same Secret.
	NNodes   int
	NodeRank int
	// Coordinator is rank 0's control-plane "host:port", which every rank
	// is given (CHOREO_COORDINATOR); every other port is bound by its own
	// rank and reported at the rendezvous. On one node it may be left
	// empty (127.0.0.1 and a port chosen here) or given a port 0 (a port
	// chosen here on that host): the port is chosen outside the kernel's
	// ephemeral range, so that nothing the ranks bind or dial can take it
	// before rank 0 binds it. With several nodes it must name a port.
	Coordinator string
	// Hosts, when set, runs node i on Hosts[i] ("host" or "user@host"),
	// each started as SSH + host + Remote's command line (a choreorun
	// there, with this Spec's flags); NNodes is then len(Hosts) and this
	// process runs no rank itself. Node 0's choreorun chooses the
	// coordinator's port on Hosts[0] and reports it before the other
	// nodes start. The secret, the run and Env reach the other hosts on
	// the SSH command's standard input, never on a command line.
	Hosts []string
	// SSH is the command that runs a command line on a host: it is given
	// the host, then the command line as one shell-quoted argument.
	// Default {"ssh", "-o", "BatchMode=yes"}.
	SSH []string
	// Remote is the choreorun command on the other hosts; default this
	// executable's path.
	Remote []string
	// Env holds "KEY=VALUE" entries every rank gets, over what it
	// inherits and what the launcher sets.
	Env []string
	// RankEnv, if set, gives each rank (by global rank) more entries; not
	// with Hosts.
	RankEnv func(rank int) []string
	// Secret is the ranks' shared secret (CHOREO_SECRET, at least 16
	// bytes); default 32 random bytes in hex, made for this launch, on one
	// node. It reaches the ranks through their environment only.
	Secret string
	// Run names the run (CHOREO_RUN); default a random name on one node,
	// else one derived from the secret and the coordinator (every node
	// derives the same).
	Run string
	// TagOutput leads each line of a rank's output with "[rank] ". Lines
	// are whole either way: ranks' lines never interleave mid-line.
	TagOutput bool
	// LogDir, if set, sends each rank's output (stdout and stderr) to
	// LogDir/rank-<rank>.log, created, instead of this process's.
	LogDir string
	// Grace is how long a rank asked to stop (SIGTERM to its process
	// group) may take before it is killed; default 3 s.
	Grace time.Duration
	// Deadline, if positive, stops every rank after this long.
	Deadline time.Duration
	// PeerLostExit, if not 0, is the exit status of a rank that failed
	// only because another was lost: the rank that failed first is then
	// named instead, if it shows within a second (at most the grace).
	PeerLostExit int
	// Stdout and Stderr receive the ranks' lines; default this process's.
	Stdout, Stderr io.Writer
	// Signals stop the launch (a second one kills at once); default
	// SIGINT and SIGTERM to this process.
	Signals <-chan os.Signal
	// Started, if set, is called with every rank's pid once all have
	// started (with Hosts: every node's SSH command's); a rank an elastic
	// launch starts again later is not reported.
	Started func(pids []int)
	// Log receives the launcher's own events; default none.
	Log *zap.Logger
	// Elastic keeps the launch going when a rank that has joined its group
	// (it called Joined) dies or exits unsuccessfully: the other ranks go
	// on (they shrink their group), Lost hears of it, and the launch ends
	// once every rank has exited. It succeeds when at least one rank
	// exited 0 and every rank still running when the first one did so
	// exited 0 too. A rank that fails before it joined stops the launch as
	// without Elastic. Not with Hosts (run one launcher per host instead).
	// With MaxRestarts, a lost rank is started again (see MaxRestarts).
	Elastic bool
	// Lost, if set, is called (from the supervising goroutine) with each
	// process an elastic launch loses, as it is lost, before any restart
	// of its rank.
	Lost func(Loss)
	// MaxRestarts, if positive, is how many times the launch may start
	// ranks again. Without Elastic, every rank starts again when the
	// launch fails (a rank exited unsuccessfully: ErrFailed), as
	// torchrun's --max-restarts does: the whole group starts over, under a
	// new run name unless Run is set, and each rank finds the count in
	// CHOREO_RESTART_COUNT (0 the first time) to resume from its own
	// checkpoint. An interruption or the deadline (which counts from the
	// first start) ends the launch.
	//
	// With Elastic, only a lost rank starts again, at once, with its
	// rank's environment (the same run, coordinator and secret) and
	// CHOREO_RESTART_COUNT the number of times that rank has been started
	// again (1 the first time), so that it rejoins the group its survivors
	// run on (they grow it, collectives.Group.Grow); MaxRestarts counts
	// the restarts of all ranks together. A restarted rank calls Joined
	// again once it has rejoined; if it dies or fails, before or after,
	// it is lost as any joined rank (the others go on) and may be started
	// again while restarts remain. No rank is restarted once the launch is
	// ending: after an interruption, the deadline or a failure, once a
	// rank has exited 0, or when no other rank is running. Rank 0 is never
	// restarted, nor any rank once rank 0 is lost: rank 0 hosts the
	// group's rendezvous, without which no rank can rejoin.
	//
	// On one node either way.
	MaxRestarts int
	// Restarting, if set, is called before each restart of every rank
	// (MaxRestarts without Elastic) with its number (1 for the first) and
	// the failure that caused it.
	Restarting func(n int, cause error)
	// RankRestarting, if set, is called (from the supervising goroutine)
	// before a lost rank of an elastic launch is started again
	// (MaxRestarts with Elastic), after Lost has heard of the loss.
	RankRestarting func(RankRestart)

	// agent: this node was started by another launcher over SSH: a chosen
	// coordinator port is reported on Stdout before any rank starts.
	agent bool
}

// Defaults.
const (
	DefaultGrace = 3 * time.Second
	// reapTimeout bounds the wait for processes after SIGKILL.
	reapTimeout = 5 * time.Second
	// peerLostWindow bounds how long the launcher, having seen a rank that
	// lost a peer, waits for the rank that failed first.
	peerLostWindow = time.Second
	// minSecret is the shortest secret the ranks accept.
	minSecret = 16
)

// withDefaults fills the defaults and checks s.
func (s Spec) withDefaults() (Spec, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("launch: %s: %w", fmt.Sprintf(format, a...), ErrBadArgument)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return s, bad("no program to run")
	}
	if len(s.Hosts) > 0 {
		if s.NNodes != 0 && s.NNodes != len(s.Hosts) {
			return s, bad("%d nodes for %d hosts", s.NNodes, len(s.Hosts))
		}
		s.NNodes = len(s.Hosts)
		for _, h := range s.Hosts {
			if h == "" || strings.ContainsAny(h, " \t\n'\"") {
				return s, bad("host %q", h)
			}
		}
		if s.RankEnv != nil {
			return s, bad("per-rank variables cannot reach other hosts")
		}
		if s.Elastic {
			return s, bad("an elastic launch over SSH: run one launcher on each host instead")
		}
	}
	if s.NNodes == 0 {
		s.NNodes = 1
	}
	switch {
	case s.NProcPerNode < 1:
		return s, bad("%d ranks per node, want at least 1", s.NProcPerNode)
	case s.NNodes < 1:
		return s, bad("%d nodes", s.NNodes)
	case s.NodeRank < 0 || s.NodeRank >= s.NNodes:
		return s, bad("node rank %d of %d nodes", s.NodeRank, s.NNodes)
	case s.Secret != "" && len(s.Secret) < minSecret:
		return s, bad("the secret has %d bytes, want at least %d", len(s.Secret), minSecret)
	case s.NNodes > 1 && len(s.Hosts) == 0 && s.Secret == "":
		return s, bad("%d nodes need one secret: set CHOREO_SECRET (the same on every node, at least %d bytes)", s.NNodes, minSecret)
	case s.MaxRestarts < 0:
		return s, bad("%d restarts", s.MaxRestarts)
	case s.MaxRestarts > 0 && s.NNodes > 1:
		return s, bad("restarts of a launch over %d nodes: every node's ranks would have to start over together; restart the launchers instead", s.NNodes)
	case s.NNodes > 1 && len(s.Hosts) == 0 && !s.agent && hasNoPort(s.Coordinator):
		return s, bad("%d nodes need the coordinator's host:port (rank 0's, on node 0), the same on every node", s.NNodes)
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			return s, bad("variable %q, want KEY=VALUE", e)
		}
	}
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if len(s.SSH) == 0 {
		s.SSH = []string{"ssh", "-o", "BatchMode=yes"}
	}
	if s.Stdout == nil {
		s.Stdout = os.Stdout
	}
	if s.Stderr == nil {
		s.Stderr = os.Stderr
	}
	if s.Log == nil {
		s.Log = zap.NewNop()
	}
	return s, nil
}

// hasNoPort reports whether addr is empty or names port 0 (or none).
func hasNoPort(addr string) bool {
	if addr == "" {
		return true
	}
	_, p, err := splitHostPort(addr)
	return err != nil || p == 0
}
