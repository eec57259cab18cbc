package collectives

import (
	"errors"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/metrics"
)

// WithMetrics counts the group's collectives (calls, bytes, latency,
// failures by cause) and reports its gauges (fences live, GPU waits
// pending, staging bytes in use) on m; see metrics.Serve for a Prometheus
// endpoint. Without it, a group counts nothing, unless CHOREO_METRICS_ADDR
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

// watchMetrics starts reporting the group's gauges; the group stops it
// when it closes.
func (g *Group) watchMetrics() {
	if g.met == nil {
		return
	}
	g.stopMetrics = g.met.Watch(g.id, g.Rank(), func() metrics.Gauges {
		return metrics.Gauges{
			FencesLive:      int64(g.fences.Live()),
			GPUWaitsPending: inflight.pendingWaits(g.id, g.Rank()),
			StagingBytes:    g.stagingBytes.Load(),
		}
	})
}

// countCall records a finished collective of the group.
func (g *Group) countCall(op string, bytes int, d time.Duration, err error) {
	g.met.Collective(g.id, op, bytes, d, causeOf(err))
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
