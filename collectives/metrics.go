package collectives

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/metrics"
)

// WithMetrics counts the group's collectives (calls, bytes, latency,
// failures by cause) and reports its gauges (fences live, GPU waits
// pending, staging bytes in use) on m, each labelled with the group's name
// (Name) and the rank; see metrics.Serve for a Prometheus endpoint. Without it, a group counts nothing, unless CHOREO_METRICS_ADDR
// names an address: then every group of the process reports to one
// endpoint there (loopback for a bare ":port").
func WithMetrics(m *metrics.Metrics) Option { return func(c *config) { c.metrics = m } }

// envMetrics is the process's endpoint for CHOREO_METRICS_ADDR: the
// variable names one address per process, so one endpoint serves every
// group, started by the first.
var envMetrics struct {
	once sync.Once
	m    *metrics.Metrics
}

// metricsFromEnv returns the CHOREO_METRICS_ADDR endpoint's Metrics, or nil
// when the variable is unset or the endpoint could not start (logged).
func metricsFromEnv(log *zap.Logger) *metrics.Metrics {
	envMetrics.once.Do(func() {
		addr := os.Getenv(metrics.EnvAddr)
		if addr == "" {
			return
		}
		s, err := metrics.Serve(addr, log)
		if err != nil {
			log.Warn("collectives: metrics endpoint not started", zap.String(metrics.EnvAddr, addr), zap.Error(err))
			return
		}
		envMetrics.m = s.Metrics
	})
	return envMetrics.m
}

// Name is the group's name: the group label of its metrics, and the
// prefix of the names of the groups Split makes from it. WithName gives
// it; else it is derived, the same on every rank and in every run of a
// program that makes its groups in the same order:
//
//   - a group Join made: "world" for the first group this process joined
//     as its rank, then "world-2", "world-3", ...;
//   - a group Split made: its parent's name, "/split-" and eight hex
//     digits that hash its members (their ranks in the parent), with "-2",
//     "-3", ... when the parent was split into the same members before;
//   - a group of Local or New: "group-" and its id (Local numbers its
//     worlds 1, 2, ... in the order the process makes them).
func (g *Group) Name() string { return g.cfg.name }

// groupNames counts the groups the process has named, for the names that
// depend on the order of creation; each count is per rank, so that ranks
// in one process (tests, Local) count as ranks in processes of their own.
var groupNames struct {
	mu     sync.Mutex
	joins  map[int]int      // per rank: groups Join made
	splits map[splitKey]int // per parent, members and rank: groups Split made
}

type splitKey struct {
	parent  string
	members uint32
	rank    int
}

// nameGroup derives the group's name (see Name) unless WithName gave one.
// A group Split made inherits its parent's config, name included, so its
// name always starts from the parent's.
func (g *Group) nameGroup() string {
	groupNames.mu.Lock()
	defer groupNames.mu.Unlock()
	if sub, ok := g.t.(*subTransport); ok {
		h := fnv.New32a()
		for _, r := range sub.ranks {
			_ = binary.Write(h, binary.LittleEndian, uint32(r))
		}
		k := splitKey{g.cfg.name, h.Sum32(), g.Rank()}
		if groupNames.splits == nil {
			groupNames.splits = map[splitKey]int{}
		}
		groupNames.splits[k]++
		return numbered(fmt.Sprintf("%s/split-%08x", g.cfg.name, k.members), groupNames.splits[k])
	}
	switch {
	case g.cfg.name != "":
		return g.cfg.name
	case g.cfg.processes:
		if groupNames.joins == nil {
			groupNames.joins = map[int]int{}
		}
		groupNames.joins[g.Rank()]++
		return numbered("world", groupNames.joins[g.Rank()])
	}
	return "group-" + strconv.FormatUint(g.id, 10)
}

// numbered is name for the first, name-k for the k-th.
func numbered(name string, k int) string {
	if k <= 1 {
		return name
	}
	return name + "-" + strconv.Itoa(k)
}

// watchMetrics names the group (Name) and starts reporting its gauges;
// the group stops it when it closes.
func (g *Group) watchMetrics() {
	g.cfg.name = g.nameGroup()
	if g.epoch > 0 { // a group that joined its world at a later epoch (WithEpoch)
		g.base = g.cfg.name
		g.cfg.name = fmt.Sprintf("%s/epoch-%d", g.base, g.epoch)
	}
	if g.met == nil {
		return
	}
	g.stopMetrics = g.met.Watch(g.cfg.name, g.Rank(), func() metrics.Gauges {
		return metrics.Gauges{
			FencesLive:      int64(g.fences.Live()),
			GPUWaitsPending: inflight.pendingWaits(g.id, g.Rank()),
			StagingBytes:    g.stagingBytes.Load(),
		}
	})
}

// countCall records a finished collective of the group's rank.
func (g *Group) countCall(op string, bytes int, d time.Duration, err error) {
	g.met.Collective(g.cfg.name, g.Rank(), op, bytes, d, causeOf(err))
}

// causeOf names why a collective failed, for the failures counter: the
// first of these sentinels err matches ("" for nil).
func causeOf(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrShapeMismatch):
		return "shape_mismatch"
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrPeerLost):
		return "peer_lost"
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrAborted):
		return "aborted"
	case errors.Is(err, ErrBadArgument), errors.Is(err, ErrBadOp), errors.Is(err, ErrBadPeer), errors.Is(err, ErrTooLarge):
		return "bad_argument"
	}
	return "other"
}
