package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/zap"
)

// rewatchEvery is how long a Node waits, after a sign that a peer may be
// gone that its address then disproves, before it watches the peer again.
const rewatchEvery = 250 * time.Millisecond

// doubtForget is how long after its latest sign a doubt about a peer is
// forgotten: a sign after that starts a new one.
const doubtForget = 3 * time.Second

// Local messages of a suspicion.
type (
	// dialed is the end of a dial of a suspected rank's control address:
	// gone is why no process listens there any more, nil if one may.
	dialed struct {
		rank int
		addr string // the address dialled
		gone error
	}
	// rewatch: watch the suspected rank again.
	rewatch struct{ rank int }
)

// suspect handles a sign that rank's Node may be gone that is no proof of
// it: its watch ended (also when the Node was not there yet, or the watch
// was dropped while the remoting's first connect to the peer was being
// retried, as happens on a loaded host), or the runtime's connection to
// the peer ended. The peer's control
// address is dialled: refused, its process is gone and the rank is lost at
// once; otherwise the peer is watched again after rewatchEvery, and it is
// lost only when such signs have gone on for the peer timeout. A rank that
// said it leaves is lost at once.
func (a *nodeActor) suspect(c actor.Context, rank int, addr string, cause error) {
	if _, lost := a.lost[rank]; lost {
		return
	}
	if _, left := a.left[rank]; left {
		a.lose(c, rank, cause)
		return
	}
	if a.doubt == nil {
		a.doubt = map[int]doubt{}
	}
	d, ok := a.doubt[rank]
	if !ok || time.Since(d.last) > doubtForget {
		d, ok = doubt{since: time.Now(), addr: addr}, false
	}
	d.last = time.Now()
	if time.Since(d.since) >= a.n.patience() {
		a.lose(c, rank, fmt.Errorf("%w (for %v)", cause, time.Since(d.since).Round(time.Millisecond)))
		return
	}
	d.cause = cause
	if d.dialing {
		a.doubt[rank] = d
		return
	}
	d.dialing = true
	a.doubt[rank] = d
	if !ok {
		a.log.Warn("a peer may be gone: checking its address", zap.Int("peer_rank", rank), zap.Error(cause))
	}
	self, root := c.Self(), a.n.rt.ActorSystem().Root
	go func() { root.Send(self, dialed{rank: rank, addr: addr, gone: gone(context.Background(), rank, addr)}) }()
}

// doubt is a suspected rank's state: its address, since when signs have come, when the
// latest came and what it was, and whether a dial of its address is out.
type doubt struct {
	addr        string // its control address
	since, last time.Time
	cause       error
	dialing     bool
}

// dialed handles a suspected rank's dial: refused, the rank is lost;
// otherwise it is watched again after rewatchEvery.
func (a *nodeActor) dialed(c actor.Context, m dialed) {
	d, ok := a.doubt[m.rank]
	if !ok || d.addr != m.addr { // a process the rank no longer is (the group grew back)
		return
	}
	d.dialing = false
	a.doubt[m.rank] = d
	if m.gone != nil {
		a.lose(c, m.rank, fmt.Errorf("%w (after: %v)", m.gone, d.cause))
		return
	}
	self, root := c.Self(), a.n.rt.ActorSystem().Root
	time.AfterFunc(rewatchEvery, func() { root.Send(self, rewatch{rank: m.rank}) })
}

// rewatched watches a suspected rank again (a NotFound or a connection's
// end comes back as another sign if it is still gone).
func (a *nodeActor) rewatched(c actor.Context, m rewatch) {
	if _, lost := a.lost[m.rank]; lost {
		return
	}
	c.Watch(actor.NewPID(a.doubt[m.rank].addr, Name))
}

// patience is how long signs that a peer may be gone may go on before it
// is lost while its address still accepts connections: the peer timeout.
func (n *Node) patience() time.Duration {
	if n.spec.PeerTimeout > 0 {
		return n.spec.PeerTimeout
	}
	return DefaultPeerTimeout
}
