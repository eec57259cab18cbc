package msg

import (
	"fmt"
	"time"
)

// tick is the heartbeat: every link looks after itself (pings, an idle
// link's reading) and says when it last heard its peer; a peer silent for
// PeerTimeout is told it is evicted, and lost; owed window bytes go back.
func (e *Endpoint) tick() {
	e.gmu.Lock()
	if e.stopped {
		e.gmu.Unlock()
		return
	}
	e.wg.Add(1)
	e.gmu.Unlock()
	defer e.wg.Done()
	e.beat(time.Now().UnixNano())
	e.gmu.Lock()
	if !e.stopped {
		e.timer.Reset(e.cfg.HeartbeatInterval)
	}
	e.gmu.Unlock()
}

func (e *Endpoint) beat(now int64) {
	// A late tick means this process itself was stalled: its readers may
	// not have read what its peers sent, so that interval counts nothing.
	t := e.alive.Tick(now)
	for _, p := range e.peers {
		if p == nil || p.down.Load() {
			continue
		}
		p.mu.Lock()
		p.flushCredit()
		p.mu.Unlock()
		heard := p.link.Tick()
		limit := e.cfg.PeerTimeout
		if heard <= p.first { // not heard since this Endpoint started: it may not have started yet
			limit = max(limit, e.cfg.StartTimeout)
		}
		if silent := p.quiet.Count(t, heard); silent > int64(limit) {
			p.evict(fmt.Errorf("silent for %v (timeout %v)",
				time.Duration(silent).Round(time.Millisecond), limit), now)
		}
	}
}
