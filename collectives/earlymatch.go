package collectives

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/choreo-gpu/choreo/collectives/algo"
)

// The early match: a collective's signature is compared with its peers'
// as soon as every rank has called it, not only once its input is ready.
//
// The algorithms match the ranks' signatures as their first step, on the
// comm task; a task whose input is not written yet (staged device memory,
// whose copy into host memory is queued on the GPU stream; an input still
// being computed; the device path's first fence wait) would meet its peers
// only after that, which behind a busy GPU stream can be seconds. So every
// rank of an in-process world posts each call's signature on the world's
// board at launch (a store, no hand-off, nothing that waits), and a task
// that waits for its input also waits for the board's verdict: once every
// rank has posted the call, their signatures are compared, and a
// disagreement ends the wait at once with ErrMismatch (ErrShapeMismatch
// where the shapes differ). The task then aborts the collective, so that
// peers already inside the algorithm's match fail at once too, and the
// output carries the error. The last rank to post checks the waiting tasks
// of its call on its own goroutine; a waiting task is woken only by a
// disagreement.
//
// The board compares what every data path's match compares and nothing
// more (the op and its shape, the data path), so it never fails a call the
// algorithm's match would pass; what it does not see (an algorithm option
// that differs, a post already replaced by a rank's later call) the
// algorithm's match still finds once the input is ready. It serves the
// ranks of one process (Local's worlds), which share memory; ranks in
// separate processes meet in the algorithms' match after their input.

// boardSlots is how many consecutive calls a board keeps posts of: a rank
// more than boardSlots calls ahead of a waiting peer has overwritten its
// post, which the peer then does not compare (the algorithm's match does).
const boardSlots = 64

// sigBoard is an in-process world's record of its ranks' latest calls'
// signatures, and of the tasks waiting on an input that want to hear of a
// disagreement. Safe for concurrent use.
type sigBoard struct {
	n     int
	slots [boardSlots]boardSlot
}

// boardSlot holds, per rank, the latest post of the calls whose sequence
// numbers fall on it, and the tasks waiting on one of them.
type boardSlot struct {
	posts   []atomic.Pointer[callSig]
	waiting atomic.Int32 // len(watches), read without mu by posters
	mu      sync.Mutex
	watches []*matchWatch
}

// callSig is one rank's call as the board compares it: the fields of the
// descriptor that every rank must pass alike, and the data path.
type callSig struct {
	rank   int
	seq    uint64
	d      algo.Desc
	device bool
}

// boards maps a Local world's group id to its board; an entry goes when the
// world's groups are gone.
var boards sync.Map

// boardOf is g's world's board, or nil where g's ranks are not one
// in-process world.
func boardOf(g *Group) *sigBoard {
	if g.board == nil {
		return nil
	}
	if b, ok := boards.Load(g.id); ok {
		return b.(*sigBoard)
	}
	b := &sigBoard{n: g.Size()}
	for i := range b.slots {
		b.slots[i].posts = make([]atomic.Pointer[callSig], b.n)
	}
	got, loaded := boards.LoadOrStore(g.id, b)
	if !loaded {
		runtime.AddCleanup(g.board, func(id uint64) { boards.Delete(id) }, g.id)
	}
	return got.(*sigBoard)
}

// post records s and checks the tasks waiting on its call.
func (b *sigBoard) post(s *callSig) {
	sl := &b.slots[s.seq%boardSlots]
	sl.posts[s.rank].Store(s)
	if sl.waiting.Load() == 0 {
		return
	}
	sl.mu.Lock()
	for _, w := range sl.watches {
		if w.sig.seq == s.seq {
			if _, err := b.check(w.sig); err != nil {
				w.fail(err)
			}
		}
	}
	sl.mu.Unlock()
}

// check compares the posts of s's call, s standing for its own rank's:
// done once every rank has posted it, with their disagreement if any.
// Before that (or once a rank's later call has replaced its post) there is
// no verdict yet. Every rank that checks a call reaches the same verdict:
// each rank's post against rank 0's.
func (b *sigBoard) check(s *callSig) (done bool, err error) {
	sl := &b.slots[s.seq%boardSlots]
	post := func(r int) *callSig {
		if r == s.rank {
			return s
		}
		if p := sl.posts[r].Load(); p != nil && p.seq == s.seq {
			return p
		}
		return nil
	}
	first := post(0)
	if first == nil {
		return false, nil
	}
	for r := 1; r < b.n; r++ {
		p := post(r)
		if p == nil {
			return false, nil
		}
		if err == nil {
			err = first.against(p)
		}
	}
	return true, err
}

// against is the disagreement between s and peer p's call, or nil.
func (s *callSig) against(p *callSig) error {
	a, o := s.d, p.d
	switch {
	case a.Kind != o.Kind || s.device != p.device:
	case a.Kind != algo.KindBarrier && a.DType != o.DType,
		a.Kind != algo.KindBarrier && a.Kind != algo.KindAllToAll && a.Count != o.Count:
		return fmt.Errorf("rank %d called %s, rank %d %s: %w: %w", s.rank, s, p.rank, p, ErrShapeMismatch, ErrMismatch)
	case reduces(a.Kind) && a.Op != o.Op, rooted(a.Kind) && a.Root != o.Root:
	default:
		return nil
	}
	return fmt.Errorf("rank %d called %s, rank %d %s: %w", s.rank, s, p.rank, p, ErrMismatch)
}

func (s *callSig) String() string {
	if s.device {
		return s.d.String() + " on the device path"
	}
	return s.d.String()
}

func reduces(k algo.Kind) bool {
	return k == algo.KindAllReduce || k == algo.KindReduceScatter || k == algo.KindReduce
}

func rooted(k algo.Kind) bool {
	return k == algo.KindBroadcast || k == algo.KindGather || k == algo.KindScatter || k == algo.KindReduce
}

// matchWatch is a task waiting on its input that wants to hear of a peer's
// disagreement: fail records the first and cancels the wait's context.
type matchWatch struct {
	sig    *callSig
	cancel context.CancelCauseFunc
	err    atomic.Pointer[error]
}

func (w *matchWatch) fail(err error) {
	if w.err.CompareAndSwap(nil, &err) {
		w.cancel(err)
	}
}

// result is the wait's: the disagreement where one ended it.
func (w *matchWatch) result(err error) error {
	if m := w.err.Load(); m != nil && err != nil {
		return *m
	}
	return err
}

// postSig posts the call's signature on its world's board (calls that
// take the group's call order only; send and recv are matched per pair).
func (c *call) postSig() {
	if c.p.p2p {
		return
	}
	if c.board = boardOf(c.g); c.board == nil {
		return
	}
	c.sig = &callSig{rank: c.g.Rank(), seq: c.p.desc.Seq, d: c.p.desc, device: c.device}
	c.board.post(c.sig)
}

// awaitInput is the call's first wait for its input (c.fin), ended early
// by the board's verdict where the ranks disagree, which it then returns
// (the caller aborts the collective with it, as with any failure before
// the algorithm). A verdict known already ends it at once; the wait is
// made all the same, so that the fence's steps are the same whichever rank
// called first.
func (c *call) awaitInput(ctx context.Context) error {
	b := c.board
	if b == nil {
		return c.fin.Wait(ctx)
	}
	done, err := b.check(c.sig)
	if done && err == nil { // every rank called it alike: nothing to watch for
		return c.fin.Wait(ctx)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w := &matchWatch{sig: c.sig, cancel: cancel}
	if err != nil {
		w.fail(err)
		return w.result(c.fin.Wait(wctx))
	}
	sl := &b.slots[c.sig.seq%boardSlots]
	sl.mu.Lock()
	sl.watches = append(sl.watches, w)
	sl.waiting.Add(1)
	sl.mu.Unlock()
	// A rank that posted between the check above and the registration did
	// not see this watch: check once more.
	if _, err := b.check(c.sig); err != nil {
		w.fail(err)
	}
	err = c.fin.Wait(wctx)
	sl.mu.Lock()
	if i := slices.Index(sl.watches, w); i >= 0 {
		sl.watches = slices.Delete(sl.watches, i, i+1)
	}
	sl.waiting.Add(-1)
	sl.mu.Unlock()
	return w.result(err)
}
