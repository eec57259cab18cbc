package mesh

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// crowdEvery is how often OnRefused hears of the connections the gate
// turned away (refused, or cut to make room), as one error with their
// number: a flood turns away thousands a second.
const crowdEvery = time.Second

// reporter counts the refused connections of one Connect and tells
// Config.OnRefused: each refused handshake at once, the connections the
// gate turned away together, at most once every crowdEvery. Safe for
// concurrent use.
type reporter struct {
	prefix  string // "<label> mesh: rank <r>"
	on      func(error)
	refused atomic.Uint64

	mu    sync.Mutex
	crowd int       // connections turned away since the last report
	at    time.Time // the last report
	from  net.Addr  // the last one turned away, and why
	why   error
}

func (r *reporter) refuse(from net.Addr, err error) {
	r.refused.Add(1)
	if r.on != nil {
		r.on(fmt.Errorf("%s: refused a connection from %s: %w", r.prefix, addrText(from), err))
	}
}

// turnedAway counts a connection the gate refused or cut, reporting it at
// once if none was reported in the last crowdEvery, else later.
func (r *reporter) turnedAway(from net.Addr, err error) {
	r.refused.Add(1)
	r.mu.Lock()
	r.crowd++
	r.from, r.why = from, err
	due := time.Since(r.at) >= crowdEvery
	r.mu.Unlock()
	if due {
		r.flush()
	}
}

func (r *reporter) flush() {
	r.mu.Lock()
	n, from, why := r.crowd, r.from, r.why
	r.crowd, r.at = 0, time.Now()
	r.mu.Unlock()
	if r.on != nil && n > 0 {
		r.on(fmt.Errorf("%s: refused %d connection(s), the last from %s: %w", r.prefix, n, addrText(from), why))
	}
}

// addrText names a peer's address; an unnamed unix socket's is "?".
func addrText(a net.Addr) string {
	if a == nil || a.String() == "" || a.String() == "@" || a.String() == "<nil>" {
		return "?"
	}
	return a.String()
}
