package shm

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// maxRTS bounds the messages per peer that wait for their Recv (a sender
// waits for a turn; a receiver drops a peer that announces four times
// more). It also keeps the control ring from filling: each clear-to-send
// answers one of them.
const maxRTS = ctlEntries / 2

// Transport is one rank's endpoint of a group whose ranks are processes of
// one host, joined pairwise by shared memory (see the package doc). It
// implements transport.Transport, not transport.PeerAccess.
//
// Contract: that of transport.Transport, with these particulars. A message
// of at most EagerMax bytes (and one slot) is sent at once when the
// receiver's window (its MaxBuffered) has room, and Send returns nil once
// it is in the ring; a larger one, or one that does not fit, waits for the
// receiver's Recv (rendezvous) and is then copied from the caller's slice
// into slots and from the slots into the receiver's buffer. A Recv that
// ends (context, Abort, Close) once its message was matched consumes that
// message, whose Send still returns nil. A peer whose process ends is lost
// at once (its socket closes), after what it had published is drained; one
// that stays silent for PeerTimeout is lost then; either way its
// operations fail with transport.ErrPeerLost, and so do they when it
// breaks the protocol. Per peer a pump goroutine drains the incoming ring
// and reads the socket while calls are in flight and for a few
// milliseconds after; an idle transport has none but a heartbeat timer,
// which pumps each peer briefly. Close waits for them and unmaps every
// region.
type Transport struct {
	cfg   Config
	rank  int
	size  int
	peers []*peer // nil at rank
	epoch time.Time

	busy     atomic.Int64 // Send and Recv calls in flight
	lastTick atomic.Int64 // when the heartbeat last ran
	closed   atomic.Bool
	done     chan struct{} // closed by Close

	gmu     sync.Mutex // guards stopped, timer and wg.Add
	stopped bool
	wg      sync.WaitGroup
	timer   *time.Timer

	aborts transport.Aborts
	poll   spin.Adaptive // how long a waiting call polls (see poll.go)

	refused, protoErrs, lostPeers atomic.Uint64
	singleCopies                  atomic.Uint64
	closeOnce                     sync.Once
}

var _ transport.Transport = (*Transport)(nil)

// Stats counts what a Transport refused or dropped.
type Stats struct {
	// Refused is the number of connections refused during Connect: bad
	// handshakes (strangers, wrong secret, wrong group or run, garbage)
	// and duplicates.
	Refused uint64
	// ProtocolErrors is the number of peers dropped for breaking the
	// protocol (a malformed slot or frame, a window overrun).
	ProtocolErrors uint64
	// PeersLost is the number of peers lost, whatever the reason.
	PeersLost uint64
	// SingleCopies is the number of messages received by reading the
	// sender's memory (see Config.CMAMin).
	SingleCopies uint64
}

// Stats returns the counters.
func (t *Transport) Stats() Stats {
	return Stats{Refused: t.refused.Load(), ProtocolErrors: t.protoErrs.Load(), PeersLost: t.lostPeers.Load(),
		SingleCopies: t.singleCopies.Load()}
}

func newTransport(cfg Config) *Transport {
	t := &Transport{cfg: cfg, rank: cfg.Rank, size: cfg.Size, peers: make([]*peer, cfg.Size),
		epoch: time.Now(), done: make(chan struct{})}
	t.poll.Init(spin.PollBudget(envPoll, cfg.Size))
	for r := range cfg.Size {
		if r != cfg.Rank {
			t.peers[r] = newPeer(t, r)
		}
	}
	return t
}

func (t *Transport) now() int64 { return int64(time.Since(t.epoch)) }

// goAdd runs f in a goroutine Close waits for; it returns false (and runs
// nothing) once Close has begun.
func (t *Transport) goAdd(f func()) bool {
	t.gmu.Lock()
	defer t.gmu.Unlock()
	if t.stopped {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		f()
	}()
	return true
}

// Rank is this endpoint's rank.
func (t *Transport) Rank() int { return t.rank }

// Size is the number of ranks in the group.
func (t *Transport) Size() int { return t.size }

func (t *Transport) wrap(peer int, what string, tag transport.Tag, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("shm: rank %d: peer %d: %s %v: %w", t.rank, peer, what, tag, err)
}

func (t *Transport) peerOf(r int) (*peer, error) {
	if r < 0 || r >= t.size || r == t.rank {
		return nil, transport.ErrBadPeer
	}
	return t.peers[r], nil
}

// enter and exit bracket every Send and Recv: pumps run while any is in
// flight (and linger a little after).
func (t *Transport) enter() {
	if t.busy.Add(1) == 1 {
		for _, p := range t.peers {
			if p != nil {
				p.kick(0)
			}
		}
	}
}

func (t *Transport) exit() {
	if t.busy.Add(-1) == 0 {
		for _, p := range t.peers {
			if p != nil {
				p.idle()
			}
		}
	}
}

// start begins the data plane once every pair is connected: each peer's
// goroutines and the heartbeat.
func (t *Transport) start() {
	now := t.now()
	t.lastTick.Store(now)
	for _, p := range t.peers {
		if p != nil {
			p.start(now)
		}
	}
	t.gmu.Lock()
	if !t.stopped && t.size > 1 {
		t.timer = time.AfterFunc(t.cfg.HeartbeatInterval, t.tick)
	}
	t.gmu.Unlock()
}

// Close shuts this endpoint down: its operations fail with ErrClosed, its
// sockets close (so the peers' operations with it fail with ErrPeerLost),
// and it returns once every goroutine it started has ended and every
// region is unmapped. Close is idempotent.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		close(t.done)
		t.gmu.Lock()
		t.stopped = true
		if t.timer != nil {
			t.timer.Stop()
		}
		t.gmu.Unlock()
		for _, p := range t.peers {
			if p != nil {
				p.lose(nil)
			}
		}
		t.wg.Wait()
		for _, p := range t.peers {
			if p != nil {
				p.unmap()
			}
		}
	})
	return nil
}

// tick is the heartbeat: it drops silent peers, pings the others when
// nothing else was written to them lately, and lets an idle transport's
// peers be pumped briefly (pings, aborts, a peer's end, messages that
// arrived while no call was in flight).
func (t *Transport) tick() {
	t.gmu.Lock()
	if t.stopped {
		t.gmu.Unlock()
		return
	}
	t.wg.Add(1)
	t.gmu.Unlock()
	defer t.wg.Done()

	now := t.now()
	hb := int64(t.cfg.HeartbeatInterval)
	// A tick that comes late means this process itself was stalled: its
	// readers may not have read what its peers sent, so silence proves
	// nothing this time.
	judge := now-t.lastTick.Swap(now) <= 2*hb
	for _, p := range t.peers {
		if p == nil || p.down.Load() {
			continue
		}
		if silent := now - p.lastRead.Load(); judge && silent > int64(t.cfg.PeerTimeout) {
			p.lose(fmt.Errorf("silent for %v (timeout %v)", time.Duration(silent).Round(time.Millisecond), t.cfg.PeerTimeout))
			continue
		}
		if now-p.sock.lastWrite.Load() >= hb/2 {
			p.sock.send(pingFrame)
		}
		p.kick(drainLinger)
	}
	t.gmu.Lock()
	if !t.stopped {
		t.timer.Reset(t.cfg.HeartbeatInterval)
	}
	t.gmu.Unlock()
}

// Frames without fields, encoded once.
var (
	pingFrame  = (&frame{kind: fPing}).bytes()
	dataFrame  = (&frame{kind: fData}).bytes()
	spaceFrame = (&frame{kind: fSpace}).bytes()
)
