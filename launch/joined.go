package launch

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// EnvJoined names the unix socket on which an elastic launch's launcher
// hears that a rank has joined its group (Joined). It is set for every
// rank of an elastic launch only.
const EnvJoined = "CHOREO_LAUNCH_JOINED"

// joinedTimeout bounds Joined's exchange with the launcher, and the
// launcher's read of one report.
const joinedTimeout = 5 * time.Second

// Joined tells the launcher of an elastic launch (Spec.Elastic) that this
// rank's group has formed: from then on the rank's end, however it ends,
// no longer ends the launch. collectives/cluster's Join calls it once the
// group is made; a program that forms its group otherwise calls it then.
// The call returns once the launcher has recorded it (bounded by a few
// seconds). Outside an elastic launch (EnvJoined unset) it does
// nothing and returns nil. A rank that never calls it is treated as one
// failing at start: its failure stops the launch. A rank started again
// in place of a lost one (EnvRestartCount above 0) calls it again once it
// has rejoined: the report names the start it comes from, so that a
// report of the lost process never counts for its replacement.
func Joined() error {
	path := os.Getenv(EnvJoined)
	if path == "" {
		return nil
	}
	rank, err := strconv.Atoi(os.Getenv(EnvRank))
	if err != nil {
		return fmt.Errorf("launch: joined: %s=%q: %w", EnvRank, os.Getenv(EnvRank), ErrBadArgument)
	}
	restart := 0
	if v := os.Getenv(EnvRestartCount); v != "" {
		if restart, err = strconv.Atoi(v); err != nil || restart < 0 {
			return fmt.Errorf("launch: joined: %s=%q: %w", EnvRestartCount, v, ErrBadArgument)
		}
	}
	c, err := net.DialTimeout("unix", path, joinedTimeout)
	if err != nil {
		return fmt.Errorf("launch: joined: %w", err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(joinedTimeout))
	if _, err := fmt.Fprintf(c, "joined %s %d %d\n", os.Getenv(EnvRun), rank, restart); err != nil {
		return fmt.Errorf("launch: joined: %w", err)
	}
	ack, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("launch: joined: the launcher's answer: %w", err)
	}
	if ack != "ok\n" {
		return fmt.Errorf("launch: joined: the launcher answered %q: %w", strings.TrimSpace(ack), ErrBadArgument)
	}
	return nil
}

// joinedListener is an elastic launch's end of Joined: it records which
// starts of the node's ranks have joined (a report is "joined RUN RANK
// RESTART", or without RESTART, which counts as 0, the first start).
// Reports for another run, or for a rank that is not this node's, are
// answered with an error and change nothing.
type joinedListener struct {
	dir  string
	l    net.Listener
	run  string
	log  *zap.Logger
	mu   sync.Mutex
	seen map[rankStart]bool
	want func(rank int) bool // the node's ranks
	wg   sync.WaitGroup
}

// rankStart is one start of a rank: its first (restart 0) or its restart-th
// replacement.
type rankStart struct{ rank, restart int }

// listenJoined listens on a new socket in a directory of its own (only
// this user can reach it) for the ranks of run that want accepts.
func listenJoined(run string, want func(int) bool, log *zap.Logger) (*joinedListener, error) {
	dir, err := os.MkdirTemp("", "choreorun-")
	if err != nil {
		return nil, fmt.Errorf("launch: joined socket: %w", err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, "joined.sock"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("launch: joined socket: %w", err)
	}
	j := &joinedListener{dir: dir, l: l, run: run, log: log, seen: map[rankStart]bool{}, want: want}
	j.wg.Go(j.accept)
	return j, nil
}

// path is the socket's path, for EnvJoined.
func (j *joinedListener) path() string { return j.l.Addr().String() }

// joined reports whether the given start of rank (0 its first) has said
// it joined.
func (j *joinedListener) joined(rank, restart int) bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seen[rankStart{rank, restart}]
}

// accept serves reports until the listener closes.
func (j *joinedListener) accept() {
	for {
		c, err := j.l.Accept()
		if err != nil {
			return
		}
		j.wg.Go(func() { j.serve(c) })
	}
}

// serve reads one report from c and answers it.
func (j *joinedListener) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(joinedTimeout))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	st, ok := j.parse(line)
	if !ok {
		j.log.Warn("joined: report refused", zap.String("report", strings.TrimSpace(line)))
		_, _ = fmt.Fprintln(c, "refused")
		return
	}
	j.mu.Lock()
	j.seen[st] = true
	j.mu.Unlock()
	j.log.Info("rank joined", zap.Int("rank", st.rank), zap.Int("restart", st.restart))
	_, _ = fmt.Fprintln(c, "ok")
}

// parse reads a report: the start it names, and whether it is one of this
// run's ranks on this node.
func (j *joinedListener) parse(line string) (rankStart, bool) {
	f := strings.Fields(line)
	if len(f) != 3 && len(f) != 4 || f[0] != "joined" || f[1] != j.run {
		return rankStart{}, false
	}
	r, err := strconv.Atoi(f[2])
	if err != nil || !j.want(r) {
		return rankStart{}, false
	}
	st := rankStart{rank: r}
	if len(f) == 4 {
		if st.restart, err = strconv.Atoi(f[3]); err != nil || st.restart < 0 {
			return rankStart{}, false
		}
	}
	return st, true
}

// close stops listening, waits for the reports being served (each bounded
// by joinedTimeout) and removes the socket.
func (j *joinedListener) close() {
	if j == nil {
		return
	}
	_ = j.l.Close()
	j.wg.Wait()
	_ = os.RemoveAll(j.dir)
}
