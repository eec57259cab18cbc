package msg

import (
	"fmt"
	"math"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"go.uber.org/zap"
)

// The eviction notice travels as the abort of a collective that no tag of
// transport's layout names (a point-to-point Seq whose destination is out
// of range), with a cause that carries transport.CauseEvicted: links
// carry it as they carry any abort.
const (
	noticeGroup = math.MaxUint64
	noticeSeq   = math.MaxUint64
)

// isNotice reports whether an abort of (group, seq) with a cause of code
// is an eviction notice.
func isNotice(group, seq uint64, code transport.CauseCode) bool {
	return group == noticeGroup && seq == noticeSeq && code&transport.CauseEvicted != 0
}

// goRun runs f on a goroutine Close waits for, and reports whether it
// did: once Close has begun it runs nothing.
func (e *Endpoint) goRun(f func()) bool {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	if e.stopped {
		return false
	}
	e.wg.Go(f)
	return true
}

// evictedErr is what every call fails with once this rank is evicted
// (it wraps transport.ErrEvicted and transport.ErrPeerLost), or nil.
func (e *Endpoint) evictedErr() error {
	if err := e.evicted.Load(); err != nil {
		return *err
	}
	return nil
}

// evictedBy takes peer by's eviction notice (text: its verdict): this
// rank was dropped. Its pending and later calls fail, and its peers are
// lost, with an error wrapping transport.ErrEvicted; the first notice
// counts.
func (e *Endpoint) evictedBy(by int, text string) {
	err := fmt.Errorf("%w: %w: rank %d dropped rank %d: %s", transport.ErrPeerLost, transport.ErrEvicted, by, e.cfg.Rank, text)
	if e.closed.Load() || !e.evicted.CompareAndSwap(nil, &err) {
		return
	}
	e.cfg.Logger.Warn("evicted", zap.String("transport", e.cfg.Name), zap.Int("rank", e.cfg.Rank),
		zap.Int("by", by), zap.String("verdict", text))
	// Losing a peer closes its link: not on the goroutine of the link that
	// brought the notice (a reader), which a link's Close may wait for.
	e.goRun(func() {
		for _, p := range e.peers {
			if p != nil {
				p.Lose(err)
			}
		}
	})
}

// evict loses p, silent past the peer timeout (cause says how long), and
// tells it first, best effort: an eviction notice, queued on its link,
// which closes only a heartbeat later (or at Close), so that the notice
// may leave before the link ends. Meanwhile the link reads what the peer
// sent before it went silent (a Tick), so that the close is a clean end
// of what the peer reads, not a reset that would drop the notice.
func (p *Peer) evict(cause error, now int64) {
	e := p.e
	notice := &transport.AbortError{Origin: e.cfg.Rank, Group: noticeGroup, Seq: noticeSeq,
		Cause: transport.RemoteCause(transport.CauseEvicted, cause.Error())}
	p.mu.Lock()
	up := p.lost == nil
	p.mu.Unlock()
	if !up {
		return
	}
	p.link.Abort(notice, now)
	if !p.markLost(cause) {
		return
	}
	linger := e.cfg.HeartbeatInterval
	closing := func() {
		p.link.Tick()
		t := time.NewTimer(linger)
		defer t.Stop()
		select {
		case <-t.C:
		case <-e.done:
		}
		p.link.Close()
	}
	if !e.goRun(closing) {
		p.link.Close()
	}
}
