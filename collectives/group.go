package collectives

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/metrics"
	"github.com/choreo-gpu/choreo/streams"
	"github.com/choreo-gpu/choreo/trace"
)

// Group is one rank's view of a group of ranks. Collectives on a group are
// matched across ranks by call order, so each rank must call them in the
// same order; calls from several goroutines on one group are serialised
// (the order is whatever order the calls take the group's lock). Each rank
// of a group owns its communication stream; ranks never share one. Methods
// are safe for concurrent use.
type Group struct {
	rt     *actors.Runtime
	fences *fence.Manager
	t      transport.Transport
	comm   *streams.Comm
	id     uint64
	cfg    config

	mu      sync.Mutex // call order: sequence numbers and comm submission
	seq     uint64
	asks    uint64      // Grow's asks so far
	sendSeq []uint64    // per destination
	recvSeq []uint64    // per source
	closed  bool        // no new calls: Close, or Shrink, finished the group
	closing atomic.Bool // Close has begun: failures from now on match ErrClosed
	onClose func()      // NewJoined's leave: stops the rank's control-plane node
	// released: Close has run (closed alone may be Shrink's doing, after
	// which Close still releases the comm stream and the staging).
	released bool

	lineage // where the group stands among its world's epochs (shrink.go)

	errMu  sync.Mutex
	errs   []error // failures since the last Wait
	splits atomic.Uint64

	staging stagingPool // pinned staging buffers for later calls
	engine  groupEngine // the engine path's engine (engine.go)
	// oneDevice: every rank's collectives run on one device the device
	// path serves (cfg.dev), as the group agreed when it was made.
	oneDevice bool

	rec   *trace.Recorder // nil unless WithTracer
	board *arrivals       // the world's arrivals, for in-process worlds (Local)

	met          *metrics.Metrics // nil unless WithMetrics or CHOREO_METRICS_ADDR
	stopMetrics  func()
	stagingBytes atomic.Int64 // held by this rank's calls in flight
}

var groupIDs atomic.Uint64

// newGroup makes a rank's group over t with its own communication stream.
func newGroup(rt *actors.Runtime, t transport.Transport, id uint64, cfg config) (*Group, error) {
	cfg, err := cfg.withTopology(t.Size())
	if err != nil {
		return nil, fmt.Errorf("collectives: group %d rank %d: %w", id, t.Rank(), err)
	}
	raw := t // the transport itself, under any tracing
	if cfg.rec == nil && cfg.tracer != nil {
		cfg.rec = cfg.tracer.Rank(t.Rank())
		t = transport.Traced(t, cfg.rec)
	}
	fences, err := fence.For(rt)
	if err != nil {
		return nil, fmt.Errorf("collectives: group %d rank %d: %w", id, t.Rank(), err)
	}
	comm, err := streams.NewComm(rt, fmt.Sprintf("g%d-r%d", id, t.Rank()))
	if err != nil {
		return nil, fmt.Errorf("collectives: group %d rank %d: %w", id, t.Rank(), err)
	}
	if cfg.metrics == nil {
		cfg.metrics = metricsFromEnv(rt.Logger())
	}
	g := &Group{rt: rt, fences: fences, t: t, comm: comm, id: id, cfg: cfg, rec: cfg.rec, met: cfg.metrics,
		sendSeq: make([]uint64, t.Size()), recvSeq: make([]uint64, t.Size()),
		lineage: newLineage(t, raw, cfg.epoch)}
	g.watchMetrics()
	return g, nil
}

func defaultConfig(opts []Option) config {
	cfg := config{timeout: 30 * time.Second, datapath: dataPathFromEnv()}
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// New makes this rank's Group over t, with group id id. Every rank of the
// group passes the same id (agreed when the ranks found each other, for
// example at a rendezvous); the id keeps the group's messages apart from
// every other group's on the same transport, so it must differ from the
// other groups' ids there, and Local's and Split's ids too (Local numbers
// its worlds from 1 in each process; Split's ids have the top bit set).
// The group has its own comm stream per rank; Close closes t.
func New(rt *actors.Runtime, t transport.Transport, id uint64, opts ...Option) (*Group, error) {
	if rt == nil || t == nil {
		return nil, fmt.Errorf("collectives: new group: nil runtime or transport: %w", ErrBadArgument)
	}
	if t.Size() < 1 || t.Rank() < 0 || t.Rank() >= t.Size() {
		return nil, fmt.Errorf("collectives: new group: rank %d of %d: %w", t.Rank(), t.Size(), ErrBadArgument)
	}
	return newGroup(rt, t, id, defaultConfig(opts))
}

// Local returns the n groups of an in-process world: groups[r] is rank r.
// The ranks share rt (one fence actor) but each has its own communication
// stream; their transport hands slices over directly, and the algorithms
// read peers' buffers in place, so no byte is copied twice.
func Local(rt *actors.Runtime, n int, opts ...Option) ([]*Group, error) {
	if rt == nil {
		return nil, fmt.Errorf("collectives: local: nil runtime: %w", ErrBadArgument)
	}
	if n < 1 {
		return nil, fmt.Errorf("collectives: local: %d ranks: %w", n, ErrBadArgument)
	}
	cfg := defaultConfig(opts)
	id := groupIDs.Add(1)
	ts := transport.NewLocal(n)
	groups := make([]*Group, n)
	board := newArrivals(n)
	for r := range n {
		g, err := newGroup(rt, ts[r], id, cfg)
		if err != nil {
			for _, t := range ts {
				_ = t.Close()
			}
			return nil, err
		}
		g.board = board
		g.oneDevice = sharable(cfg.dev) // every rank got the same option
		groups[r] = g
	}
	return groups, nil
}

// Rank is this rank's number in the group, 0..Size()-1.
func (g *Group) Rank() int { return g.t.Rank() }

// Size is the number of ranks.
func (g *Group) Size() int { return g.t.Size() }

// ID is the group's id, the same on every rank.
func (g *Group) ID() uint64 { return g.id }

// Comm is the rank's communication stream for this group.
func (g *Group) Comm() *streams.Comm { return g.comm }

// Wait blocks until every collective this rank has started on the group has
// finished (bounded by ctx) and returns the failures since the last Wait,
// joined. It is how a caller learns of a failed Send, which has no output.
func (g *Group) Wait(ctx context.Context) error {
	wait, err := g.onComm("wait", func(context.Context) error { return nil })
	if err == nil {
		err = wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("collectives: wait rank %d: %w", g.Rank(), err)
	}
	g.errMu.Lock()
	defer g.errMu.Unlock()
	err = errors.Join(g.errs...)
	g.errs = nil
	return err
}

// Close leaves the group: this rank's pending collectives fail, and peers
// see ErrPeerLost for anything involving this rank. The runtime
// remains usable for new groups. A group that Shrink replaced leaves the
// transport to its successor: its Close releases only what is its own.
func (g *Group) Close() error {
	g.mu.Lock()
	if g.released {
		g.mu.Unlock()
		return nil
	}
	g.released = true
	g.closed = true
	g.closing.Store(true)
	owns, leave := g.owns, g.onClose
	g.owns, g.onClose = false, nil
	g.mu.Unlock()
	var err error
	if owns {
		err = g.root.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.cfg.timeout)
	defer cancel()
	if cerr := g.comm.Close(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	g.staging.close()
	g.engine.close()
	if g.stopMetrics != nil {
		g.stopMetrics()
	}
	if leave != nil {
		leave()
	}
	if err != nil {
		return fmt.Errorf("collectives: close group %d rank %d: %w", g.id, g.Rank(), err)
	}
	return nil
}

// onComm queues run on the rank's comm stream, under the group's timeout,
// and returns a wait for its outcome, bounded by the wait's ctx and by the
// time the tasks queued ahead may take. Calls that take a sequence number
// queue under g.mu, so the comm stream runs them in their order.
func (g *Group) onComm(name string, run func(ctx context.Context) error) (wait func(context.Context) error, err error) {
	done := make(chan error, 1)
	bound := time.Duration(g.comm.Pending()+1) * (g.cfg.timeout + time.Second)
	err = g.comm.Submit(streams.Task{Name: name, Run: func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, g.cfg.timeout)
		defer cancel()
		return run(cctx)
	}, Done: func(err error) { done <- err }})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		t := time.NewTimer(bound)
		defer t.Stop()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return transport.CtxError(ctx)
		case <-t.C:
			return fmt.Errorf("%s: not run within %v: %w", name, bound, ErrTimeout)
		}
	}, nil
}

// closedErr adds ErrClosed to a failure that happened because the group
// is closing (its transport and comm stream went away under the call).
func (g *Group) closedErr(err error) error {
	if err != nil && g.closing.Load() && !errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

func (g *Group) record(err error) {
	if err == nil {
		return
	}
	g.errMu.Lock()
	g.errs = append(g.errs, err)
	g.errMu.Unlock()
}
