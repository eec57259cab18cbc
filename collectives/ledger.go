package collectives

import (
	"fmt"
	"sync"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/fence"
	"github.com/choreo-gpu/choreo/streams"
)

// ledger knows, per GPU stream of this process, the GPU sides of the
// collectives still on it, in enqueue order, and refuses a launch whose GPU
// side would close a cycle of waits: rank r's input update queued behind a
// GPU-side wait that can only pass once that same update has run. That
// happens when two ranks of one collective share a stream, or when ranks
// share streams across groups and issue the groups' collectives in
// different orders; it would otherwise stall until the fence deadline. The
// launch fails at once with ErrWouldDeadlock instead (and aborts the
// peers). Streams are unique objects, so one ledger serves every runtime
// of the process; streams of other processes cannot be seen, and there the
// fence deadline bounds such a stall.
type ledger struct {
	mu      sync.Mutex
	streams map[*streams.GPU][]*side
}

// side is one rank's GPU side of one collective on one stream: an input
// update (the comm task needs it to have run) and an output wait (it holds
// back every later command on the stream), each live until its event is done.
type side struct {
	key  transport.Tag // the collective: the same on every rank
	rank int
	upd  streams.Event // valid while an update is queued
	wait streams.Event // valid while a wait is queued
	// enqueued is false while the commands are being put on the stream:
	// the side counts as live then.
	enqueued bool
	// fin and fout are the fences of the update and of the wait. Once one
	// is released (the collective failed, or ended) its command waits for
	// nothing: the wait passes whenever the stream reaches it, and no task
	// needs the update any more. A fence's state is reused only after its
	// commands have run, so Released is read while it still says so.
	fin, fout *fence.Fence
}

func (e *side) updLive() bool {
	return !e.enqueued || e.upd.Valid() && !e.upd.Done() && !e.fin.Released()
}
func (e *side) waitLive() bool {
	return !e.enqueued && e.wait.Valid() || e.wait.Valid() && !e.wait.Done() && !e.fout.Released()
}

var inflight = &ledger{streams: map[*streams.GPU][]*side{}}

// enter checks and records a rank's GPU side of collective key on s before
// it is enqueued; hasUpd and hasWait say which commands it will have, on
// fences fin and fout. The caller enqueues them while it holds the ledger
// (enter locks it; done unlocks it), so the ledger's order is the stream's
// order.
func (l *ledger) enter(key transport.Tag, rank int, s *streams.GPU, hasUpd, hasWait bool, fin, fout *fence.Fence) (*side, error) {
	l.mu.Lock()
	for s := range l.streams {
		l.prune(s)
	}
	if hasUpd {
		for _, p := range l.streams[s] {
			if !p.waitLive() {
				continue
			}
			if p.key == key || l.dependsOn(p.key, key, map[transport.Tag]bool{}) {
				l.mu.Unlock()
				return nil, fmt.Errorf("stream %s holds a GPU-side wait of %v (rank %d) ahead of this rank's input, "+
					"and that wait can pass only after this collective has run: give each rank its own GPU stream, "+
					"and issue the collectives of groups that share streams in the same order on every rank: %w",
					s.Name(), p.key, p.rank, ErrWouldDeadlock)
			}
		}
	}
	e := &side{key: key, rank: rank, fin: fin, fout: fout}
	if hasWait {
		e.wait = s.Last() // placeholder: valid, so waitLive holds until done
	}
	if hasUpd || hasWait {
		l.streams[s] = append(l.streams[s], e)
	}
	return e, nil
}

// done records the events of a side entered last, then unlocks the ledger.
// An invalid upd or wait Event means that command was not enqueued.
func (l *ledger) done(e *side, upd, wait streams.Event) {
	e.upd, e.wait, e.enqueued = upd, wait, true
	l.mu.Unlock()
}

// dependsOn reports whether collective a waits, through some stream, for
// collective b: a side of a with a live update sits behind a live wait of
// b, directly or through other collectives. seen stops cycles not through b.
func (l *ledger) dependsOn(a, b transport.Tag, seen map[transport.Tag]bool) bool {
	if seen[a] {
		return false
	}
	seen[a] = true
	for _, sides := range l.streams {
		for i, x := range sides {
			if x.key != a || !x.updLive() {
				continue
			}
			for _, y := range sides[:i] {
				if !y.waitLive() || y.key == a && y.rank == x.rank {
					continue
				}
				if y.key == b || l.dependsOn(y.key, b, seen) {
					return true
				}
			}
		}
	}
	return false
}

// prune drops the sides of s whose commands have all run (and s, with
// none left, so a closed stream is not kept).
func (l *ledger) prune(s *streams.GPU) {
	sides := l.streams[s]
	n := 0
	for _, e := range sides {
		if e.updLive() || e.waitLive() {
			sides[n] = e
			n++
		}
	}
	clear(sides[n:])
	if n == 0 {
		delete(l.streams, s)
		return
	}
	l.streams[s] = sides[:n]
}

// pendingWaits counts the GPU-side waits of rank of group still queued on
// the streams of this process.
func (l *ledger) pendingWaits(group uint64, rank int) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, sides := range l.streams {
		for _, e := range sides {
			if e.key.Group == group && e.rank == rank && e.enqueued && e.wait.Valid() && !e.wait.Done() {
				n++
			}
		}
	}
	return n
}
