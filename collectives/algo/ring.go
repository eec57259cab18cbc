package algo

import (
	"context"
	"sync"

	"github.com/choreo-gpu/choreo/collectives/reduce"
	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/gpu"
)

// ringDepth is how many sends, and how many receives, each direction of
// the ring keeps in flight: over a network a message costs a round trip
// before its bytes move (the receiver's go-ahead), and several in flight
// hide it behind the others' bytes. Each in-flight message has a tag of its
// own (ringLane.tag), so the transport never has two calls of one tag
// outstanding, and a tag's messages stay in order.
const ringDepth = 4

// ringSlots is how many receive buffers of one chunk each direction of the
// reduce-scatter keeps: ringDepth being filled, one being folded by the
// reducer and one to spare.
const ringSlots = ringDepth + 2

// ringSpec is one run of the bidirectional ring over n blocks.
//
// Global steps: 0..n-2 reduce-scatter, n-1..2n-3 all-gather; a run covers
// [g0, g1). In direction d (+1: send to rank+1; -1: send to rank-1) rank r
// sends block r-d(G+1) and receives block r-d(G+2) at step G, so that after
// the reduce-scatter rank r holds the fully reduced block r (the block split
// ReduceScatter promises) and the all-gather starts by sending it. Every
// block is split in two halves by element, the lower half travelling in
// direction +1 and the upper one in direction -1; each half is cut into
// chunks of chunk bytes, the unit of pipelining.
type ringSpec struct {
	dt    gpu.DType
	op    reduce.Op
	chunk int
	g0    int
	g1    int
	// acc(b) is where block b is reduced (reduce-scatter) or received
	// (all-gather), and what later steps send.
	acc func(b int) []byte
	// in(b) is block b of the input: the first operand of each reduction
	// and what step 0 sends. nil for a run without reduce-scatter.
	in func(b int) []byte
}

// ringItem is one chunk received in one step.
type ringItem struct {
	g, b, lo, hi int
	slot         []byte // reduce-scatter: where the chunk was received
	op           *ringOp
}

// ringOp is one transport call of a lane, run on a goroutine of its own:
// done is closed when it has returned, with err.
type ringOp struct {
	done chan struct{}
	err  error
}

// startOp runs f on a goroutine and returns its ringOp.
func startOp(f func() error) *ringOp {
	o := &ringOp{done: make(chan struct{})}
	go func() {
		o.err = f()
		close(o.done)
	}()
	return o
}

// wait waits for o to return (or ctx to end) and returns its error.
func (o *ringOp) wait(ctx context.Context) error {
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return transport.CtxError(ctx)
	}
}

// window is a lane's calls in flight of one kind (sends or receives), at
// most ringDepth, oldest first: the k-th call of the lane uses tag step
// k mod ringDepth, and starts only once the call ringDepth before it (the
// last one on that tag) has returned.
type window struct {
	ops [ringDepth]*ringOp
	k   int
}

// next waits until the k-th call may start and returns its tag index.
func (w *window) next(ctx context.Context) (int, error) {
	i := w.k % ringDepth
	if o := w.ops[i]; o != nil {
		if err := o.wait(ctx); err != nil {
			return 0, err
		}
	}
	return i, nil
}

// started records the k-th call.
func (w *window) started(o *ringOp) {
	w.ops[w.k%ringDepth] = o
	w.k++
}

// drain waits for every call still in flight and returns the first error.
// After a failure the caller fails the lane's tasks first: that ends the
// context the calls run under, so they return at once. Their buffers are
// the caller's again after drain.
func (w *window) drain() error {
	var first error
	for _, o := range w.ops {
		if o != nil {
			<-o.done
			if first == nil {
				first = o.err
			}
		}
	}
	return first
}

// ring runs spec in both directions at once.
func (c *coll) ring(spec ringSpec) error {
	if c.n == 1 || spec.g0 >= spec.g1 {
		return nil
	}
	g := newTasks(c.ctx)
	for dirIdx, d := range [2]int{+1, -1} {
		g.goDo(func() error { return c.ringDir(g.ctx, spec, dirIdx, d, g.fail) })
	}
	return g.wait()
}

// half returns the part of block buffer blk that direction dirIdx carries.
func (spec *ringSpec) half(blk []byte, dirIdx int) []byte {
	es := spec.dt.Size()
	mid := len(blk) / es / 2 * es
	if dirIdx == 0 {
		return blk[:mid]
	}
	return blk[mid:]
}

// chunks is the number of chunks of a half of n bytes.
func (spec *ringSpec) chunks(n int) int { return (n + spec.chunk - 1) / spec.chunk }

// ringDir runs one direction: a sender, a receiver and a reducer, linked by
// channels; the sender's chunk k of step G waits until the reducer finished
// chunk k of step G-1 (the same block).
func (c *coll) ringDir(ctx context.Context, spec ringSpec, dirIdx, d int, fail func(error)) error {
	l, biggest := c.newRingLane(&spec, dirIdx, d)
	if spec.in != nil && biggest > 0 {
		l.fillSlots(biggest)
		// Runs after the sender and receiver have returned (wg.Wait below);
		// slots still held by unreduced items after a failure are dropped.
		defer l.drainSlots()
	}
	l.fail = fail
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		fail(l.send(ctx))
	}()
	go func() {
		defer wg.Done()
		fail(l.recv(ctx))
	}()
	err := l.reduce(ctx) // this goroutine
	fail(err)
	wg.Wait()
	return err
}

// ringLane is one direction of a ring run: what its sender, receiver and
// reducer share.
type ringLane struct {
	c          *coll
	spec       *ringSpec
	dirIdx     int
	d          int // +1 or -1: the direction's step through the ranks
	next, prev int // the ranks sent to and received from
	total      int // chunks received over the run
	// items carries each received chunk to the reducer; ready tells the
	// sender that one more chunk is reduced (or passed on). Both hold
	// total, so neither send blocks.
	items chan ringItem
	ready chan struct{}
	// free holds the reduce-scatter receive slots not in use.
	free chan []byte
	// fail fails the run's tasks (ending the context of every call).
	fail func(error)
	// rsSent is closed once every reduce-scatter send of the lane has
	// returned. The all-gather receives into blocks those sends read
	// (the input in place, or partial sums): the peers cannot send those
	// bytes before they have them, but that order runs through other
	// ranks, so the receiver waits for it here as well, and the memory
	// order is one this process itself establishes.
	rsSent chan struct{}
}

// newRingLane returns direction dirIdx (d = +1 or -1) of spec's run and the
// largest chunk it receives.
func (c *coll) newRingLane(spec *ringSpec, dirIdx, d int) (*ringLane, int) {
	n, r := c.n, c.rank
	total, biggest := 0, 0
	for g := spec.g0; g < spec.g1; g++ {
		l := len(spec.half(spec.acc(mod(r-d*(g+2), n)), dirIdx))
		total += spec.chunks(l)
		biggest = max(biggest, min(l, spec.chunk))
	}
	l := &ringLane{
		c: c, spec: spec, dirIdx: dirIdx, d: d,
		next:   mod(r+d, n),
		prev:   mod(r-d, n),
		total:  total,
		items:  make(chan ringItem, total),
		ready:  make(chan struct{}, total),
		free:   make(chan []byte, ringSlots),
		rsSent: make(chan struct{}),
	}
	if spec.g0 >= n-1 {
		close(l.rsSent) // no reduce-scatter in this run
	}
	return l, biggest
}

// fillSlots gives the lane its ringSlots receive slots of size bytes each.
func (l *ringLane) fillSlots(size int) {
	for i := 0; i < ringSlots; i++ {
		l.free <- getScratch(size)
	}
}

// drainSlots returns the slots in free to the scratch pool.
func (l *ringLane) drainSlots() {
	for {
		select {
		case b := <-l.free:
			putScratch(b)
		default:
			return
		}
	}
}

// tag is the tag of the lane's messages with tag index i (< ringDepth).
func (l *ringLane) tag(i int) transport.Tag {
	return l.c.tag(stepData + uint32(l.dirIdx*ringDepth+i))
}

// send sends each step's block, chunk by chunk, up to ringDepth chunks in
// flight; past the first step, a chunk waits until the reducer is done
// with the chunk it replaces.
func (l *ringLane) send(ctx context.Context) (err error) {
	c, spec := l.c, l.spec
	var w window
	defer func() {
		l.fail(err) // first, so that the calls in flight end at once
		if e := w.drain(); err == nil {
			err = e
		}
	}()
	for g := spec.g0; g < spec.g1; g++ {
		b := mod(c.rank-l.d*(g+1), c.n)
		var src []byte
		if g == 0 && spec.in != nil {
			src = spec.half(spec.in(b), l.dirIdx)
		} else {
			src = spec.half(spec.acc(b), l.dirIdx)
		}
		for lo := 0; lo < len(src); lo += spec.chunk {
			if g > spec.g0 {
				select {
				case <-l.ready:
				case <-ctx.Done():
					return transport.CtxError(ctx)
				}
			}
			i, err := w.next(ctx)
			if err != nil {
				return err
			}
			tag, piece := l.tag(i), src[lo:min(lo+spec.chunk, len(src))]
			w.started(startOp(func() error { return c.t.Send(ctx, l.next, tag, piece) }))
		}
		if g == c.n-2 {
			// The last reduce-scatter send has started; earlier ones have
			// returned (next waited for them) or are in the window.
			inFlight := w.ops
			go func() {
				for _, o := range inFlight {
					if o != nil {
						<-o.done
					}
				}
				close(l.rsSent)
			}()
		}
	}
	return nil
}

// recv receives each step's block, chunk by chunk, up to ringDepth chunks
// in flight: into a free slot during the reduce-scatter, in place during
// the all-gather, and hands each chunk to the reducer, in order, as soon as
// its receive has started.
func (l *ringLane) recv(ctx context.Context) (err error) {
	c, spec := l.c, l.spec
	rsEnd := c.n - 1
	var w window
	defer func() {
		l.fail(err) // first, so that the calls in flight end at once
		if e := w.drain(); err == nil {
			err = e
		}
	}()
	for g := spec.g0; g < spec.g1; g++ {
		b := mod(c.rank-l.d*(g+2), c.n)
		dst := spec.half(spec.acc(b), l.dirIdx)
		if g == rsEnd {
			select {
			case <-l.rsSent:
			case <-ctx.Done():
				return transport.CtxError(ctx)
			}
		}
		for lo := 0; lo < len(dst); lo += spec.chunk {
			it := ringItem{g: g, b: b, lo: lo, hi: min(lo+spec.chunk, len(dst))}
			into := dst[it.lo:it.hi]
			if g < rsEnd {
				select {
				case it.slot = <-l.free:
				case <-ctx.Done():
					return transport.CtxError(ctx)
				}
				into = it.slot[:it.hi-it.lo]
			}
			i, err := w.next(ctx)
			if err != nil {
				return err
			}
			tag := l.tag(i)
			it.op = startOp(func() error { return c.t.Recv(ctx, l.prev, tag, into) })
			w.started(it.op)
			l.items <- it // never blocks: capacity total
		}
	}
	return nil
}

// reduce folds each received reduce-scatter chunk into its block and frees
// its slot; every chunk, reduced or received in place, releases the sender.
func (l *ringLane) reduce(ctx context.Context) error {
	spec := l.spec
	for i := 0; i < l.total; i++ {
		var it ringItem
		select {
		case it = <-l.items:
		case <-ctx.Done():
			return transport.CtxError(ctx)
		}
		if err := it.op.wait(ctx); err != nil {
			return err
		}
		if it.slot != nil {
			dst := spec.half(spec.acc(it.b), l.dirIdx)[it.lo:it.hi]
			in := spec.half(spec.in(it.b), l.dirIdx)[it.lo:it.hi]
			if err := reduce.Many(spec.op, spec.dt, dst, in, it.slot[:it.hi-it.lo]); err != nil {
				return err
			}
			l.free <- it.slot
		}
		l.ready <- struct{}{} // never blocks: capacity total
	}
	return nil
}
