package gate

import (
	"container/list"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults for New.
const (
	// DefaultSlots is how many handshakes a gate runs at once.
	DefaultSlots = 128
	// DefaultMinAge is how long a handshake keeps its slot for certain.
	DefaultMinAge = 20 * time.Millisecond
)

// ErrFull refuses a connection that arrived while every slot held a
// handshake younger than the gate's minimum age.
var ErrFull = errors.New("gate: every handshake slot is taken")

// Gate is a listener's set of handshake slots. It is safe for concurrent
// use; its zero value is not usable (New makes one).
type Gate struct {
	slots  int
	minAge time.Duration

	mu      sync.Mutex
	waiting list.List // *Pass, oldest first

	cut, refused atomic.Uint64
}

// New makes a gate of slots handshakes (DefaultSlots when slots <= 0) in
// which a handshake younger than minAge is never cut (DefaultMinAge when
// minAge <= 0).
func New(slots int, minAge time.Duration) *Gate {
	if slots <= 0 {
		slots = DefaultSlots
	}
	if minAge <= 0 {
		minAge = DefaultMinAge
	}
	return &Gate{slots: slots, minAge: minAge}
}

// Pass is one connection's slot, held from Admit until Done.
type Pass struct {
	g    *Gate
	c    net.Conn
	at   time.Time
	elem *list.Element
}

// Admit gives c a slot. When every slot is taken it cuts the oldest
// handshake, closing its connection, if that one is at least the minimum
// age old; otherwise it refuses c with ErrFull (c is left open: the caller
// closes it). The caller must call Done on the returned Pass.
func (g *Gate) Admit(c net.Conn) (*Pass, error) {
	now := time.Now()
	var victim *Pass
	g.mu.Lock()
	if g.waiting.Len() >= g.slots {
		oldest := g.waiting.Front().Value.(*Pass)
		if now.Sub(oldest.at) < g.minAge {
			g.mu.Unlock()
			g.refused.Add(1)
			return nil, ErrFull
		}
		g.waiting.Remove(oldest.elem)
		oldest.elem = nil
		victim = oldest
	}
	p := &Pass{g: g, c: c, at: now}
	p.elem = g.waiting.PushBack(p)
	g.mu.Unlock()
	if victim != nil {
		g.cut.Add(1)
		_ = victim.c.Close()
	}
	return p, nil
}

// Done frees the pass's slot (a second call does nothing).
func (p *Pass) Done() {
	g := p.g
	g.mu.Lock()
	if p.elem != nil {
		g.waiting.Remove(p.elem)
		p.elem = nil
	}
	g.mu.Unlock()
}

// Stats counts the gate's work so far.
type Stats struct {
	Waiting int    // handshakes holding a slot now
	Cut     uint64 // handshakes cut to make room (their connections closed; a Door's guest that has just left ignores it)
	Refused uint64 // connections refused with ErrFull
}

// Stats reports the gate's counts.
func (g *Gate) Stats() Stats {
	g.mu.Lock()
	n := g.waiting.Len()
	g.mu.Unlock()
	return Stats{Waiting: n, Cut: g.cut.Load(), Refused: g.refused.Load()}
}
