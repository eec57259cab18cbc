package fence

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/gpu"
)

// Manager is the handle of the fence actor: one per runtime. The actor owns
// every fence word: it allocates them per device, keeps a few pairs ready in
// a pool so New takes one without a round trip, takes words back only
// once no queued GPU command names them, and runs the watchdog that
// releases fences whose deadline passed.
// The Manager's methods are safe for concurrent use.
type Manager struct {
	cfg config
	sys *actor.ActorSystem
	pid *actor.PID
	log *zap.Logger

	mu     sync.Mutex
	closed bool
	pools  map[gpu.Device]*pool

	nextID atomic.Uint64
	live   sync.Map // id -> *state, fences not yet released
	nLive  atomic.Int64

	stopTick  chan struct{}
	closeOnce sync.Once
}

// pool is the ready word pairs of one device, filled by the actor.
// Released fences put their idle words in returned; the actor resets them
// and puts them back in ready when it next runs (on a refill request or the
// watchdog tick), so neither New nor a release wakes the actor in the
// common case.
type pool struct {
	dev   gpu.Device
	ready chan pair

	mu       sync.Mutex
	returned []pair
	asked    atomic.Bool // a refill request is on its way to the actor
}

// Actor messages.
type (
	needWords  struct{ p *pool }      // New found the pool empty: reply with a pair
	born       struct{ p *pool }      // the pool runs low: refill
	tick       struct{}               // watchdog
	stopped    struct{ ack chan int } // closing: free pooled words
	wordsOrErr struct {
		w   pair
		err error
	}
)

// managerKey names the fence manager among a runtime's services.
var managerKey = &actors.ServiceKey{Name: "fence manager"}

// For returns rt's fence manager, starting it with the default settings on
// first use. It closes with the runtime, after the streams.
func For(rt *actors.Runtime) (*Manager, error) {
	if rt == nil {
		return nil, fmt.Errorf("fence: nil runtime: %w", gpu.ErrBadArgument)
	}
	return actors.Service(rt, managerKey, func(rt *actors.Runtime) (*Manager, error) { return newManager(rt) })
}

// Start starts rt's fence manager with opts. It fails if the manager is
// already running (For started it, or Start was called before).
func Start(rt *actors.Runtime, opts ...ManagerOption) (*Manager, error) {
	if rt == nil {
		return nil, fmt.Errorf("fence: nil runtime: %w", gpu.ErrBadArgument)
	}
	created := false
	m, err := actors.Service(rt, managerKey, func(rt *actors.Runtime) (*Manager, error) {
		created = true
		return newManager(rt, opts...)
	})
	if err == nil && !created {
		return nil, fmt.Errorf("fence: start: the runtime's fence manager is already running: %w", gpu.ErrBadArgument)
	}
	return m, err
}

// newManager starts the fence actor in rt.
func newManager(rt *actors.Runtime, opts ...ManagerOption) (*Manager, error) {
	cfg := config{deadline: time.Minute, tick: 10 * time.Millisecond, poolSize: 32}
	for _, o := range opts {
		o(&cfg)
	}
	m := &Manager{
		cfg:      cfg,
		sys:      rt.ActorSystem(),
		log:      rt.Logger(),
		pools:    map[gpu.Device]*pool{},
		stopTick: make(chan struct{}),
	}
	pid, err := m.sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return (*fenceActor)(m) }), "fences")
	if err != nil {
		return nil, fmt.Errorf("fence: spawn fence actor: %w", err)
	}
	m.pid = pid
	m.nextTick()
	return m, nil
}

// Live counts the fences handed out and not yet released.
func (m *Manager) Live() int { return int(m.nLive.Load()) }

// New hands out a fence whose words live on dev. Without WithDeadline or
// WithTimeout the manager's default deadline applies.
func (m *Manager) New(dev gpu.Device, opts ...Option) (*Fence, error) {
	if dev == nil {
		return nil, fmt.Errorf("fence: new: nil device: %w", gpu.ErrBadArgument)
	}
	fc := fenceConfig{deadline: time.Now().Add(m.cfg.deadline)}
	for _, o := range opts {
		o(&fc)
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil, fmt.Errorf("fence: new: %w", ErrClosed)
	}
	p := m.pools[dev]
	if p == nil {
		p = &pool{dev: dev, ready: make(chan pair, m.cfg.poolSize)}
		m.pools[dev] = p
	}
	m.mu.Unlock()

	var w pair
	select {
	case w = <-p.ready:
	default:
		res, err := m.sys.Root.RequestFuture(m.pid, &needWords{p}, 5*time.Second).Result()
		if err != nil {
			return nil, fmt.Errorf("fence: new: ask fence actor for words: %w", err)
		}
		r := res.(*wordsOrErr)
		if r.err != nil {
			return nil, fmt.Errorf("fence: new: %w", r.err)
		}
		w = r.w
	}
	if len(p.ready) < cap(p.ready)/4 && p.asked.CompareAndSwap(false, true) {
		m.sys.Root.Send(m.pid, &born{p})
	}

	id := m.nextID.Add(1)
	st := &state{id: id, label: fc.name, mgr: m, pool: p, words: w, deadline: fc.deadline,
		released: make(chan struct{}), rec: fc.rec, track: fc.track}
	m.live.Store(id, st)
	m.nLive.Add(1)
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if closed { // Close ran ReleaseAll while we took the words: nobody else will release it
		st.release(ErrClosed)
		return nil, fmt.Errorf("fence: new: %w", ErrClosed)
	}
	f := &Fence{st: st}
	if !fc.noCleanup {
		runtime.AddCleanup(f, func(st *state) { st.release(ErrDropped) }, st)
	}
	return f, nil
}

// ReleaseAll releases every live fence by failure with cause and returns
// how many it released. The runtime calls it when it closes and from its
// SIGINT/SIGTERM handler; it needs no actor, so it works even if the actor
// is stuck.
func (m *Manager) ReleaseAll(cause error) int {
	n := 0
	m.live.Range(func(_, v any) bool {
		st := v.(*state)
		if !st.isDone() {
			n++
		}
		st.release(cause)
		return true
	})
	return n
}

// Close releases every live fence with ErrClosed, stops the watchdog and
// the actor, and frees pooled words, bounded by ctx.
func (m *Manager) Close(ctx context.Context) error {
	var err error
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		m.ReleaseAll(ErrClosed)
		close(m.stopTick)
		ack := make(chan int, 1)
		m.sys.Root.Send(m.pid, &stopped{ack})
		select {
		case <-ack:
		case <-ctx.Done():
			err = fmt.Errorf("fence: close: %w", ctx.Err())
		}
		m.sys.Root.Stop(m.pid)
	})
	return err
}

// forget drops a released fence from the live set.
func (m *Manager) forget(st *state) {
	if _, ok := m.live.LoadAndDelete(st.id); ok {
		m.nLive.Add(-1)
	}
}

// recycle hands a released, idle fence's words back to the actor; it is
// called only once no queued command names them.
func (m *Manager) recycle(st *state) {
	p := st.pool
	p.mu.Lock()
	p.returned = append(p.returned, st.words)
	p.mu.Unlock()
}

// reuse resets the words released fences returned and pools them again.
func (m *Manager) reuse(p *pool) {
	p.mu.Lock()
	back := p.returned
	p.returned = nil
	p.mu.Unlock()
	for _, w := range back {
		w.gpu.Reset()
		w.cpu.Reset()
		m.give(p, w)
	}
}

// eachPool calls fn for every device's pool.
func (m *Manager) eachPool(fn func(*pool)) {
	m.mu.Lock()
	pools := make([]*pool, 0, len(m.pools))
	for _, p := range m.pools {
		pools = append(pools, p)
	}
	m.mu.Unlock()
	for _, p := range pools {
		fn(p)
	}
}

// nextTick asks for the watchdog's next tick: the actor schedules each
// tick when it has handled the last, so ticks never pile up behind a busy
// actor and no goroutine of the manager's own runs between them.
func (m *Manager) nextTick() {
	time.AfterFunc(m.cfg.tick, func() {
		select {
		case <-m.stopTick:
		default:
			m.sys.Root.Send(m.pid, tick{})
		}
	})
}

func (st *state) isDone() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.done
}

// fenceActor is the actor behind a Manager. Only it allocates, pools and
// frees words.
type fenceActor Manager

// Receive implements actor.Actor.
func (a *fenceActor) Receive(c actor.Context) {
	m := (*Manager)(a)
	switch msg := c.Message().(type) {
	case *needWords:
		w, err := m.alloc(msg.p.dev)
		c.Respond(&wordsOrErr{w: w, err: err})
		m.reuse(msg.p)
		m.refill(msg.p)
	case *born:
		msg.p.asked.Store(false)
		m.reuse(msg.p)
		m.refill(msg.p)
	case tick:
		defer m.nextTick()
		m.eachPool(m.reuse)
		now := time.Now()
		m.live.Range(func(_, v any) bool {
			st := v.(*state)
			st.mu.Lock()
			dl := st.deadline
			st.mu.Unlock()
			if now.After(dl) {
				m.log.Warn("fence deadline passed; releasing", zap.Stringer("fence", st))
				st.logHang(m.log)
				st.release(fmt.Errorf("%w: deadline %s passed", ErrTimeout, dl.Format(time.RFC3339Nano)))
			}
			return true
		})
	case *stopped:
		m.mu.Lock()
		pools := m.pools
		m.mu.Unlock()
		n := 0
		for _, p := range pools {
			m.reuse(p) // frees them: the manager is closed
			for drained := false; !drained; {
				select {
				case w := <-p.ready:
					w.gpu.Free()
					w.cpu.Free()
					n++
				default:
					drained = true
				}
			}
		}
		msg.ack <- n
	}
}

// alloc makes a new word pair on dev.
func (m *Manager) alloc(dev gpu.Device) (pair, error) {
	g, err := dev.NewFenceWord()
	if err != nil {
		return pair{}, fmt.Errorf("fence: allocate gpu word: %w", err)
	}
	c, err := dev.NewFenceWord()
	if err != nil {
		g.Free()
		return pair{}, fmt.Errorf("fence: allocate cpu word: %w", err)
	}
	return pair{gpu: g, cpu: c}, nil
}

// refill tops the pool up to half its capacity.
func (m *Manager) refill(p *pool) {
	for len(p.ready) < cap(p.ready)/2 {
		w, err := m.alloc(p.dev)
		if err != nil {
			m.log.Warn("fence pool refill failed", zap.Error(err))
			return
		}
		if !m.give(p, w) {
			return // closed or full: nothing more to keep
		}
	}
}

// give puts a pair in the pool and reports true, or frees it and reports
// false if the pool is full or the manager closed.
func (m *Manager) give(p *pool, w pair) bool {
	m.mu.Lock()
	closed := m.closed
	m.mu.Unlock()
	if !closed {
		select {
		case p.ready <- w:
			return true
		default:
		}
	}
	w.gpu.Free()
	w.cpu.Free()
	return false
}
