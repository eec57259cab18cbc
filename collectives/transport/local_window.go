package transport

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// leaveBound caps how long Leave waits, after a failure, for the peers to
// finish the memory work (memcpy and reduction loops) of their phase.
const leaveBound = 10 * time.Second

// Per-rank states in a window.
const (
	wsOut     = iota // not joined yet
	wsWaiting        // in Expose or Sync, waiting for the others
	wsPhase          // between two barriers: may be reading peers' buffers
	wsLeft           // called Leave
)

// window is the shared state behind every rank's Window for one tag. All
// ranks join it through the hub; barriers are generations: a generation
// completes when all ranks have arrived, which closes genCh.
type window struct {
	hub *hub
	tag Tag
	n   int

	mu      sync.Mutex
	bufs    [][][]byte
	state   []int
	arrived int
	genCh   chan struct{}
	err     error         // set once, on failure
	failCh  chan struct{} // closed on failure
	quietCh chan struct{} // closed once failed and no rank is in a phase
	left    int
}

// localWindow is one rank's handle on a window.
type localWindow struct {
	w    *window
	rank int
	once sync.Once
}

func (l *local) Expose(ctx context.Context, tag Tag, bufs ...[]byte) (Window, error) {
	h := l.hub
	wrap := func(err error) error {
		return fmt.Errorf("transport: rank %d: expose %v: %w", l.rank, tag, err)
	}
	if e := CtxError(ctx); e != nil {
		return nil, wrap(e)
	}
	h.mu.Lock()
	if e := h.checkLocked(l.rank, -1, tag); e != nil {
		h.mu.Unlock()
		return nil, wrap(e)
	}
	for r, c := range h.closed {
		if c {
			h.mu.Unlock()
			return nil, wrap(fmt.Errorf("%w: rank %d closed", ErrPeerLost, r))
		}
	}
	// A window needs every rank: one that retired the group never comes.
	for r := range h.retired {
		if h.retired[r].Has(tag.Group) {
			h.mu.Unlock()
			return nil, wrap(refusedError(r, tag.Group))
		}
	}
	w := h.windows[tag]
	if w == nil {
		w = &window{
			hub:     h,
			tag:     tag,
			n:       h.n,
			bufs:    make([][][]byte, h.n),
			state:   make([]int, h.n),
			genCh:   make(chan struct{}),
			failCh:  make(chan struct{}),
			quietCh: make(chan struct{}),
		}
		h.windows[tag] = w
	}
	w.mu.Lock()
	if w.state[l.rank] != wsOut {
		w.mu.Unlock()
		h.mu.Unlock()
		return nil, wrap(fmt.Errorf("%w: rank exposed twice", ErrBadArgument))
	}
	w.bufs[l.rank] = bufs
	w.mu.Unlock()
	h.mu.Unlock()

	lw := &localWindow{w: w, rank: l.rank}
	if err := w.barrier(ctx, l.rank); err != nil {
		lw.Leave()
		return nil, wrap(err)
	}
	return lw, nil
}

func (lw *localWindow) Buffers(rank int) [][]byte {
	if rank < 0 || rank >= lw.w.n {
		return nil
	}
	return lw.w.bufs[rank]
}

func (lw *localWindow) Sync(ctx context.Context) error {
	if err := lw.w.barrier(ctx, lw.rank); err != nil {
		return fmt.Errorf("transport: rank %d: sync %v: %w", lw.rank, lw.w.tag, err)
	}
	return nil
}

func (lw *localWindow) Leave() { lw.once.Do(func() { lw.w.leave(lw.rank) }) }

func (w *window) barrier(ctx context.Context, rank int) error {
	w.mu.Lock()
	if w.err != nil {
		w.setStateLocked(rank, wsWaiting)
		w.mu.Unlock()
		return w.errFor(rank)
	}
	w.setStateLocked(rank, wsWaiting)
	w.arrived++
	ch := w.genCh
	if w.arrived == w.n {
		for r := range w.state {
			w.state[r] = wsPhase
		}
		w.arrived = 0
		w.genCh = make(chan struct{})
		close(ch)
		w.mu.Unlock()
		return nil
	}
	w.mu.Unlock()

	// The last rank is often microseconds away: poll before parking (see
	// internal/spin).
	spin.Until(spin.Budget(), func() bool {
		select {
		case <-ch:
			return true
		case <-w.failCh:
			return true
		default:
			return false
		}
	})
	select {
	case <-ch:
		return nil
	case <-w.failCh:
	case <-ctx.Done():
		select {
		case <-ch: // completed at the same moment: take it
			return nil
		default:
		}
		err := CtxError(ctx)
		// A rank giving up fails the window for everyone, as an abort.
		(&local{hub: w.hub, rank: rank}).Abort(w.tag, fmt.Errorf("rank %d gave up waiting: %w", rank, err))
		w.fail(&AbortError{Origin: rank, Group: w.tag.Group, Seq: w.tag.Seq, Cause: err})
		return err
	}
	select {
	case <-ch: // the barrier completed before the failure
		return nil
	default:
	}
	return w.errFor(rank)
}

// errFor is the failure as rank sees it. Lock order is hub.mu before w.mu,
// so it takes them one after the other, never nested.
func (w *window) errFor(rank int) error {
	w.hub.mu.Lock()
	closed := w.hub.closed[rank]
	w.hub.mu.Unlock()
	if closed {
		return ErrClosed
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *window) setStateLocked(rank, s int) {
	w.state[rank] = s
	w.checkQuietLocked()
}

func (w *window) checkQuietLocked() {
	if w.err == nil {
		return
	}
	for _, st := range w.state {
		if st == wsPhase {
			return
		}
	}
	select {
	case <-w.quietCh:
	default:
		close(w.quietCh)
	}
}

func (w *window) fail(err error) {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return
	}
	w.err = err
	close(w.failCh)
	w.checkQuietLocked()
	w.mu.Unlock()
	w.hub.mu.Lock()
	if w.hub.windows[w.tag] == w {
		delete(w.hub.windows, w.tag)
	}
	w.hub.mu.Unlock()
}

func (w *window) leave(rank int) {
	w.mu.Lock()
	w.setStateLocked(rank, wsLeft)
	w.left++
	if w.left == w.n {
		w.mu.Unlock()
		w.hub.mu.Lock()
		if w.hub.windows[w.tag] == w {
			delete(w.hub.windows, w.tag)
		}
		w.hub.mu.Unlock()
		return
	}
	failed := w.err != nil
	w.mu.Unlock()
	if !failed {
		return
	}
	t := time.NewTimer(leaveBound)
	defer t.Stop()
	select {
	case <-w.quietCh:
	case <-t.C:
	}
}
