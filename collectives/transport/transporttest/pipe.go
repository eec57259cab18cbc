package transporttest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/collectives/transport/msg"
)

// PipeConfig sets the limits of in-memory pipe links: their msg.Limits,
// each side's eager window toward the other (the receiving endpoint's
// MaxBuffered), and, when SingleCopyMin is positive, the least message
// offered for a read by address (msg.SingleCopy). Zero fields take
// DefaultPipe's.
type PipeConfig struct {
	EagerMax, Chunk, MaxRTS, Window, SingleCopyMin int
}

var DefaultPipe = PipeConfig{EagerMax: 4 << 10, Chunk: 16 << 10, MaxRTS: 64, Window: 64 << 10}

func (c PipeConfig) withDefaults() PipeConfig {
	d := DefaultPipe
	c.EagerMax, c.Chunk = cmp.Or(c.EagerMax, d.EagerMax), cmp.Or(c.Chunk, d.Chunk)
	c.MaxRTS, c.Window = cmp.Or(c.MaxRTS, d.MaxRTS), cmp.Or(c.Window, d.Window)
	return c
}

// Pipe is one end of an in-memory msg.Link between two ranks of one
// process: one lane, frames in a mutex-guarded queue per direction, and a
// reader goroutine per end (started through Peer.Go when frames arrive,
// ending when none is left). It shows what a link is: how frames travel,
// nothing of the protocol.
type Pipe struct {
	cfg   PipeConfig
	other *Pipe
	peer  *msg.Peer

	mu      sync.Mutex
	frames  []pipeFrame // what the other end sent, not read yet
	reading bool        // a reader goroutine runs
	changed chan struct{}
	credit  int64             // the other end's window this end may still fill
	offers  map[uint64][]byte // messages offered by address, by addr

	closed   atomic.Bool  // Close was called
	gone     atomic.Bool  // its loss was declared: the Peer is called no more
	muted    atomic.Bool  // sends nothing (a silent peer)
	heard    atomic.Int64 // when the other end's last frame was read (Unix nanoseconds)
	lastSent atomic.Int64
	holds    atomic.Int64
}

func (p *Pipe) down() bool { return p.closed.Load() || p.gone.Load() }

// singlePipe is a Pipe that reads offered messages by address.
type singlePipe struct{ *Pipe }

var (
	_ msg.Link       = (*Pipe)(nil)
	_ msg.SingleCopy = singlePipe{}
)

// pipeFrame is one frame in a pipe: what its arrival does at the
// receiving end r (a call of r's Peer, with the frame's own copy of its
// bytes).
type pipeFrame func(r *Pipe) error

// payload is a frame's bytes; into hands them to the Sink a Peer call
// returned.
type payload []byte

func (b payload) into(s *msg.Sink, err error) error {
	if err != nil {
		return err
	}
	s.Copy(b)
	return s.Done()
}

// NewPipe returns the two ends of a pipe link.
func NewPipe(cfg PipeConfig) (a, b *Pipe) {
	cfg = cfg.withDefaults()
	now := time.Now().UnixNano()
	mk := func() *Pipe {
		p := &Pipe{cfg: cfg, changed: make(chan struct{}), credit: int64(cfg.Window),
			offers: make(map[uint64][]byte)}
		p.heard.Store(now)
		p.lastSent.Store(now)
		return p
	}
	a, b = mk(), mk()
	a.other, b.other = b, a
	return a, b
}

// Link returns the end as a msg.Link (a msg.SingleCopy where
// SingleCopyMin is set).
func (p *Pipe) Link() msg.Link {
	if p.cfg.SingleCopyMin > 0 {
		return singlePipe{p}
	}
	return p
}

// Pipes returns the links of a group of n ranks joined by pipes:
// links[i][j] is rank i's end of the pipe to rank j (nil where i == j).
func Pipes(n int, cfg PipeConfig) [][]msg.Link {
	links := make([][]msg.Link, n)
	for i := range links {
		links[i] = make([]msg.Link, n)
	}
	for i := range n {
		for j := i + 1; j < n; j++ {
			a, b := NewPipe(cfg)
			links[i][j], links[j][i] = a.Link(), b.Link()
		}
	}
	return links
}

// PipeEndpoints builds a group of n endpoints joined by pipes and returns
// them with their links (as Pipes does). base is every rank's msg.Config
// but for Rank and Size (zero MaxBuffered: the pipes' Window; zero
// timeouts: 10 s and 100 ms).
func PipeEndpoints(n int, cfg PipeConfig, base msg.Config) ([]*msg.Endpoint, [][]msg.Link, error) {
	cfg = cfg.withDefaults()
	base.MaxBuffered = cmp.Or(base.MaxBuffered, cfg.Window)
	base.PeerTimeout = cmp.Or(base.PeerTimeout, 10*time.Second)
	base.HeartbeatInterval = cmp.Or(base.HeartbeatInterval, 100*time.Millisecond)
	base.Name = cmp.Or(base.Name, "pipe")
	links := Pipes(n, cfg)
	eps := make([]*msg.Endpoint, n)
	for r := range n {
		c := base
		c.Rank, c.Size = r, n
		e, err := msg.New(c, links[r])
		if err != nil {
			for _, x := range eps[:r] {
				_ = x.Close()
			}
			for _, l := range links[r+1:] {
				closeAll(l)
			}
			return nil, nil, fmt.Errorf("transporttest: pipes: %w", err)
		}
		eps[r] = e
	}
	return eps, links, nil
}

func closeAll(links []msg.Link) {
	for _, l := range links {
		if l != nil {
			l.Close()
		}
	}
}

// AsPipe returns the Pipe of a link Pipes made (nil for another link).
func AsPipe(l msg.Link) *Pipe {
	switch p := l.(type) {
	case *Pipe:
		return p
	case singlePipe:
		return p.Pipe
	}
	return nil
}

// Mute makes the end send nothing from now on (on) or again (off): a
// silent peer, alive to its own endpoint.
func (p *Pipe) Mute(on bool) { p.muted.Store(on) }

// Holds is the number of Holds not Released.
func (p *Pipe) Holds() int64 { return p.holds.Load() }

func (p *Pipe) Start(peer *msg.Peer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.peer = peer
	p.kickLocked()
}

func (p *Pipe) Limits() msg.Limits {
	return msg.Limits{EagerMax: p.cfg.EagerMax, Chunk: p.cfg.Chunk, MaxRTS: p.cfg.MaxRTS}
}

func (p *Pipe) LaneOf(transport.Tag) int { return 0 }

// send puts f in the other end's queue (copying nothing: callers pass
// their own copies).
func (p *Pipe) send(f pipeFrame) {
	if p.muted.Load() || p.down() {
		return
	}
	p.lastSent.Store(time.Now().UnixNano())
	o := p.other
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down() {
		return
	}
	o.frames = append(o.frames, f)
	o.kickLocked()
}

func (p *Pipe) kickLocked() {
	if p.reading || p.peer == nil || len(p.frames) == 0 || p.down() {
		return
	}
	if p.peer.Go(p.read) {
		p.reading = true
	}
}

func (p *Pipe) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Eager never waits: a done ctx fails it, else it goes at once.
func (p *Pipe) Eager(ctx context.Context, tag transport.Tag, data []byte, _ bool) (bool, error) {
	cost := int64(len(data)) + msg.Overhead
	if len(data) > p.cfg.EagerMax {
		return false, nil
	}
	if err := transport.CtxError(ctx); err != nil {
		return true, err
	}
	p.mu.Lock()
	if p.credit < cost {
		p.mu.Unlock()
		return false, nil
	}
	p.credit -= cost
	p.mu.Unlock()
	b := payload(append([]byte(nil), data...))
	p.send(func(r *Pipe) error { return b.into(r.peer.Eager(tag, len(b))) })
	return true, nil
}

func (p *Pipe) Announce(ctx context.Context, tag transport.Tag, id uint64, data []byte) (bool, bool, error) {
	if err := transport.CtxError(ctx); err != nil {
		return false, false, err
	}
	addr, size := uint64(0), uint64(len(data))
	if m := p.cfg.SingleCopyMin; m > 0 && len(data) >= m {
		addr = id
		p.mu.Lock()
		p.offers[id] = data
		p.mu.Unlock()
	}
	p.send(func(r *Pipe) error { return r.peer.Announced(0, tag, id, size, addr) })
	return true, addr != 0, nil
}

func (p *Pipe) Chunk(ctx context.Context, tag transport.Tag, id uint64, off int, part []byte) (bool, error) {
	if err := transport.CtxError(ctx); err != nil {
		return false, err
	}
	b := payload(append([]byte(nil), part...))
	p.send(func(r *Pipe) error { return b.into(r.peer.Chunk(id, uint64(off), len(b))) })
	return true, nil
}

func (p *Pipe) Answer(_ int, id uint64, a msg.Answer) {
	p.send(func(r *Pipe) error {
		r.mu.Lock()
		delete(r.offers, id)
		r.mu.Unlock()
		r.peer.Answered(id, a)
		return nil
	})
}

func (p *Pipe) Retract(_ transport.Tag, id uint64, ack bool) {
	p.send(func(r *Pipe) error { return r.peer.Retracted(id, ack) })
}

func (p *Pipe) Consumed(n int64) { p.send(func(r *Pipe) error { return r.credited(n) }) }

func (p *Pipe) Abort(a *transport.AbortError, at int64) {
	code, text := transport.CodeOf(a.Cause), a.Cause.Error()
	p.send(func(r *Pipe) error {
		r.peer.Aborted(a.Group, a.Seq, at, code, text)
		return nil
	})
}

func (p *Pipe) Ping() { p.send(func(*Pipe) error { return nil }) }

// Hold only counts: the reader runs whenever frames come.
func (p *Pipe) Hold(int) { p.holds.Add(1) }

func (p *Pipe) Release(int, bool) { p.holds.Add(-1) }

func (p *Pipe) Wait(ctx context.Context, _ int, ready func() bool) {
	for {
		p.mu.Lock()
		ch := p.changed
		p.mu.Unlock()
		if ready() || p.down() {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		}
	}
}

func (p *Pipe) Wake(int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signalLocked()
}

func (p *Pipe) Tick() int64 {
	now := time.Now().UnixNano()
	if hb := p.peer.HeartbeatInterval(); now-p.lastSent.Load() >= int64(hb/2) {
		p.Ping()
	}
	return p.heard.Load()
}

// Close closes the end: the other end's Peer loses it once it has read
// what came before.
func (p *Pipe) Close() {
	p.mu.Lock()
	if p.closed.Swap(true) {
		p.mu.Unlock()
		return
	}
	p.frames = nil
	clear(p.offers)
	p.signalLocked()
	p.mu.Unlock()
	o := p.other
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.down() {
		o.frames = append(o.frames, func(r *Pipe) error {
			r.gone.Store(true)
			r.peer.Lose(errors.New("pipe closed by the other end"))
			return nil
		})
		o.kickLocked()
	}
}

func (s singlePipe) ReadAt(dst []byte, addr uint64, off int) error {
	o := s.other
	o.mu.Lock()
	data, ok := o.offers[addr]
	o.mu.Unlock()
	if !ok || off < 0 || off+len(dst) > len(data) {
		return fmt.Errorf("pipe: no offer of %d bytes at %#x+%d", len(dst), addr, off)
	}
	copy(dst, data[off:])
	return nil
}

// read is the reader goroutine: it hands the queued frames to the Peer, a
// batch at a time, waking the end's waits after each, until none is left.
func (p *Pipe) read() {
	for {
		p.mu.Lock()
		batch := p.frames
		p.frames = nil
		if len(batch) == 0 || p.down() {
			p.reading = false
			p.signalLocked()
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.heard.Store(time.Now().UnixNano())
		for i := range batch {
			if p.gone.Load() {
				break
			}
			if err := batch[i](p); err != nil {
				p.gone.Store(true)
				p.peer.Protocol(err)
			}
		}
		p.mu.Lock()
		p.signalLocked()
		p.mu.Unlock()
	}
}

func (p *Pipe) credited(n int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n <= 0 || p.credit+n > int64(p.cfg.Window) {
		return fmt.Errorf("pipe: credit of %d bytes over the window of %d (%d free)", n, p.cfg.Window, p.credit)
	}
	p.credit += n
	return nil
}
