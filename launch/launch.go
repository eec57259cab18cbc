package launch

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// Run runs one launch to its end: this node's ranks (or, with s.Hosts,
// every host's over SSH), supervised. It returns nil when every rank
// exited 0, else an *ExitError whose message is one line: the rank that
// failed first, how, its last line of output, and how many others were
// stopped (a rank that fails stops the launch, at start or later, unless
// the launch is elastic and the rank had joined); or the interruption; or
// the deadline. A Spec that cannot run fails before
// anything starts, wrapping ErrBadArgument.
//
// Each rank runs in a process group of its own and, on Linux, dies with
// the launcher even when the launcher is killed outright; on a failure,
// a signal or the deadline every rank gets SIGTERM, then SIGKILL after
// the grace period. No rank outlives Run.
func Run(s Spec) error {
	s, err := s.withDefaults()
	if err != nil {
		return err
	}
	if s.Signals == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(ch)
		s.Signals = ch
	}
	if len(s.Hosts) > 0 {
		return runHosts(s)
	}
	return runRestarting(s)
}

// reportPrefix leads the line in which a node started over SSH reports
// the coordinator's address it chose, before its ranks' output.
const reportPrefix = "choreorun-coordinator "

// runNode runs this node's ranks.
func runNode(s Spec) error {
	coord, chosen, err := s.coordinator()
	if err != nil {
		return err
	}
	if s.Secret == "" {
		s.Secret = randomHex(32)
	}
	if s.Run == "" {
		if s.NNodes == 1 {
			s.Run = "run-" + randomHex(6)
		} else {
			s.Run = derivedRun(s.Secret, coord)
		}
	}
	if s.agent && chosen {
		if _, err := fmt.Fprintf(s.Stdout, "%s%s\n", reportPrefix, coord); err != nil {
			return fmt.Errorf("launch: report the coordinator: %w", err)
		}
	}
	if s.LogDir != "" {
		if err := os.MkdirAll(s.LogDir, 0o755); err != nil {
			return fmt.Errorf("launch: log dir: %w", err)
		}
	}
	world, base := s.NNodes*s.NProcPerNode, s.NodeRank*s.NProcPerNode
	common := append(inherited(),
		EnvWorldSize+"="+strconv.Itoa(world),
		EnvCoordinator+"="+coord,
		EnvSecret+"="+s.Secret,
		EnvRun+"="+s.Run)
	set, ok := lookup(s.Env, "GOMAXPROCS")
	if !ok {
		set = os.Getenv("GOMAXPROCS")
	}
	common = append(common, GoMaxProcs(s.NProcPerNode, runtime.NumCPU(), set)...)
	s.Log.Info("launch", zap.Int("ranks", s.NProcPerNode), zap.Int("first", base), zap.Int("world", world),
		zap.String("coordinator", coord), zap.String("run", s.Run), zap.Strings("argv", s.Argv))

	g := newGroup(s.NProcPerNode, s.Grace, s.PeerLostExit)
	last := func(e exit) string {
		if l := e.m.errw.Last(); l != "" {
			return l
		}
		return e.m.out.Last()
	}
	var j *joinedListener
	if s.Elastic {
		if j, err = listenJoined(s.Run, func(r int) bool { return r >= base && r < base+s.NProcPerNode }, s.Log); err != nil {
			return err
		}
		defer j.close()
		common = append(common, EnvJoined+"="+j.path())
	}
	ranks := newRankStarter(s, common, base, world)
	defer ranks.close()
	if s.Elastic {
		e := &elastic{s: s, g: g, j: j, ranks: ranks, last: last, counts: map[int]int{}}
		g.joined = func(m *member) bool { return j.joined(m.id, m.restart) }
		g.onLost = e.lost
	}
	for local := range s.NProcPerNode {
		m, err := ranks.member(local, 0)
		if err != nil {
			g.abort()
			return err
		}
		if err := g.start(m); err != nil {
			g.abort()
			return fmt.Errorf("launch: start rank %d (%s): %w", base+local, s.Argv[0], err)
		}
	}
	if s.Started != nil {
		s.Started(g.pids())
	}
	o := g.supervise(s.Signals, deadline(s.Deadline))
	return verdict(o, "rank", s.Deadline, s.PeerLostExit, last)
}

// coordinator is rank 0's address for this node's ranks, and whether its
// port was chosen here.
func (s Spec) coordinator() (addr string, chosen bool, err error) {
	host, port := "127.0.0.1", 0
	if s.Coordinator != "" {
		if host, port, err = splitHostPort(s.Coordinator); err != nil {
			return "", false, fmt.Errorf("launch: %w: %w", err, ErrBadArgument)
		}
	}
	if port == 0 {
		if s.NodeRank != 0 {
			return "", false, fmt.Errorf("launch: node %d needs the coordinator's port: %w", s.NodeRank, ErrBadArgument)
		}
		if port, err = choosePort(host); err != nil {
			return "", false, err
		}
		chosen = true
	}
	return net.JoinHostPort(host, strconv.Itoa(port)), chosen, nil
}

// deadline is a channel that fires after d, or nil for none.
func deadline(d time.Duration) <-chan time.Time {
	if d <= 0 {
		return nil
	}
	return time.After(d)
}
