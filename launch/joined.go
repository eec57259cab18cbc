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
// failing at start: its failure stops the launch.
func Joined() error {
	path := os.Getenv(EnvJoined)
	if path == "" {
		return nil
	}
	rank, err := strconv.Atoi(os.Getenv(EnvRank))
	if err != nil {
		return fmt.Errorf("launch: joined: %s=%q: %w", EnvRank, os.Getenv(EnvRank), ErrBadArgument)
	}
	c, err := net.DialTimeout("unix", path, joinedTimeout)
	if err != nil {
		return fmt.Errorf("launch: joined: %w", err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(joinedTimeout))
	if _, err := fmt.Fprintf(c, "joined %s %d\n", os.Getenv(EnvRun), rank); err != nil {
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
// of the node's ranks have joined. Reports for another run, or for a rank
// that is not this node's, are answered with an error and change nothing.
type joinedListener struct {
	dir  string
	l    net.Listener
	run  string
	log  *zap.Logger
	mu   sync.Mutex
	seen map[int]bool
	want func(rank int) bool // the node's ranks
	wg   sync.WaitGroup
}

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
	j := &joinedListener{dir: dir, l: l, run: run, log: log, seen: map[int]bool{}, want: want}
	j.wg.Go(j.accept)
	return j, nil
}

// path is the socket's path, for EnvJoined.
func (j *joinedListener) path() string { return j.l.Addr().String() }

// joined reports whether rank has said it joined.
func (j *joinedListener) joined(rank int) bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.seen[rank]
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
	f := strings.Fields(line)
	rank := -1
	if len(f) == 3 && f[0] == "joined" && f[1] == j.run {
		if r, err := strconv.Atoi(f[2]); err == nil && j.want(r) {
			rank = r
		}
	}
	if rank < 0 {
		j.log.Warn("joined: report refused", zap.String("report", strings.TrimSpace(line)))
		_, _ = fmt.Fprintln(c, "refused")
		return
	}
	j.mu.Lock()
	j.seen[rank] = true
	j.mu.Unlock()
	j.log.Info("rank joined", zap.Int("rank", rank))
	_, _ = fmt.Fprintln(c, "ok")
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
