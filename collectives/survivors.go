package collectives

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

// The survivors' agreement (Shrink's first step): every rank that calls
// Shrink learns the same set of lost ranks, from what the transport itself
// reports (a Send or Recv failing with ErrPeerLost), never from a clock.
//
// It is flooding with early decision. Each rank holds L, the ranks it
// knows lost, empty at first. In round r it sends {decided: no, L} to
// every peer that has not announced a decision (also to peers in L: a
// live rank that others lost learns so from them), and receives from
// every peer outside L that has not announced. A receive (or send)
// failing with ErrPeerLost puts the peer in L; the sets received are
// unioned into L. A round is quiet when every set received equalled L as
// it stood at the round's start and no peer was newly lost; a rank
// decides L at the end of its second quiet round in a row. A rank that
// receives a decision adopts it at once (a decision outweighs any set
// received in the same round). Having decided in round x, own or adopted,
// a rank announces {decided: yes, D} in round x+1 to the same peers,
// receives their round x+1 messages, and returns D; a rank in D is
// evicted. The tags are the agreement's own group id and Seq = round, so
// they depend on nothing that differs between ranks (how many calls each
// queued before it saw the failure).
//
// Why a decision is the same everywhere (ranks fail by stopping; the
// transport eventually reports a stopped peer to every rank): a rank A
// that decides D in round r heard from every rank outside D in rounds r-1
// and r, each holding exactly D at the start of both rounds; so no rank
// outside D learned of a loss in round r-1, and one that learns of a loss
// in round r has not had two quiet rounds when A's announcement reaches
// it in round r+1: it adopts D. Two quiet rounds, not one: after a single
// quiet round a rank cannot know that a peer did not see a loss in that
// very round. If the transport loses a live peer (a false positive), the
// ranks may split; their new groups then have different ids, so that their
// messages never meet, and their first collective fails.
//
// Sends are not awaited between rounds (a rendezvous transport would
// otherwise wait for a peer's receive of the next round). At the end a rank
// waits for its sends to the peers that will still take them: those whose
// last message did not hold this rank lost (they receive from it in that
// round); its other sends are cancelled.

// maxRoundsFor bounds the rounds of an agreement among n ranks: each rank's
// L changes at most n times, and a change reaches every rank within two
// rounds. Reaching it means a broken protocol, not a slow peer.
func maxRoundsFor(n int) int { return 4*n + 8 }

// agreement is one rank's state in an agreement among the ranks of t.
type agreement struct {
	t     transport.Transport
	group uint64 // the agreement's tag group
	n, me int
	lost  []bool // L
	done  []bool // peers that announced a decision: they exchange no more

	sctx   context.Context // the sends'; cancelled when the agreement ends
	cancel context.CancelFunc
	wg     sync.WaitGroup
	toPeer []sync.WaitGroup // each peer's sends in flight

	mu       sync.Mutex
	sendLost []bool // a send to the peer failed with ErrPeerLost
	evicted  error  // a send failed with ErrEvicted
}

// agreed is an agreement's outcome.
type agreed struct {
	lost   []bool // the decision: the ranks left out (this rank among them: evicted)
	rounds int
}

// agree runs this rank's part of the agreement among the ranks of t, on
// tags of group, bounded by ctx: the set of lost ranks every caller gets,
// or an error (ErrTimeout at ctx's deadline, ErrEvicted when t says this
// rank was dropped).
func agree(ctx context.Context, t transport.Transport, group uint64) (agreed, error) {
	n := t.Size()
	a := &agreement{t: t, group: group, n: n, me: t.Rank(), lost: make([]bool, n), done: make([]bool, n),
		toPeer: make([]sync.WaitGroup, n), sendLost: make([]bool, n)}
	a.sctx, a.cancel = context.WithCancel(ctx)
	defer func() {
		a.cancel()
		a.wg.Wait() // every send returns once cancelled
	}()
	var decided []bool
	quiet := false // the previous round was quiet
	for round := 1; ; round++ {
		if decided == nil && round > maxRoundsFor(n) {
			return agreed{}, fmt.Errorf("survivors: no agreement within %d rounds among %d ranks: %w", maxRoundsFor(n), n, ErrMismatch)
		}
		msg := encodeLost(decided != nil, a.lostOrDecided(decided))
		for p := range n {
			if p != a.me && !a.done[p] {
				a.send(round, p, msg)
			}
		}
		from := a.receivers()
		got, err := a.recvAll(ctx, round, from)
		if err != nil {
			return agreed{}, err
		}
		if err := a.evictedErr(); err != nil {
			return agreed{}, err
		}
		var takers []int // the peers that receive this round's message from this rank
		var adopt []bool
		changed := false
		start := slices.Clone(a.lost)
		for i, p := range from {
			m := got[i]
			if m.err != nil { // ErrPeerLost (recvAll returns the others)
				if !a.lost[p] {
					a.lost[p], changed = true, true
				}
				continue
			}
			if !m.lost[a.me] {
				takers = append(takers, p)
			}
			if m.decided {
				a.done[p] = true
				if adopt == nil {
					adopt = m.lost
				}
				continue
			}
			if !slices.Equal(m.lost, start) {
				changed = true
			}
			for r, l := range m.lost {
				a.lost[r] = a.lost[r] || l
			}
		}
		if decided != nil { // this round announced the decision
			return agreed{lost: decided, rounds: round}, a.finish(ctx, takers)
		}
		changed = a.takeSendLosses() || changed
		switch {
		case adopt != nil:
			decided = adopt
		case quiet && !changed:
			decided = slices.Clone(a.lost)
		}
		if decided != nil { // the announcing round exchanges with the peers outside the decision
			a.lost = slices.Clone(decided)
		}
		quiet = !changed
	}
}

// lostOrDecided is what this rank's message carries: its decision once it
// has one, else L.
func (a *agreement) lostOrDecided(decided []bool) []bool {
	if decided != nil {
		return decided
	}
	return a.lost
}

// receivers are the peers this round receives from: those outside L that
// have not announced a decision.
func (a *agreement) receivers() []int {
	var from []int
	for p := range a.n {
		if p != a.me && !a.lost[p] && !a.done[p] {
			from = append(from, p)
		}
	}
	return from
}

// send sends this round's message to p without waiting for it. Where the
// transport can send it at once (an eager message, TrySender), it is
// sent here and no later cancellation can take it back: a live peer that
// others lost still gets the announcement of its eviction, though this
// rank does not wait for it to be received.
func (a *agreement) send(round, p int, msg []byte) {
	if ts, ok := a.t.(transport.TrySender); ok {
		if done, err := ts.TrySend(a.sctx, p, a.tag(round), msg); done {
			a.sent(p, err)
			return
		}
	}
	a.wg.Add(1)
	a.toPeer[p].Add(1)
	go func() {
		defer a.wg.Done()
		defer a.toPeer[p].Done()
		a.sent(p, a.t.Send(a.sctx, p, a.tag(round), msg))
	}()
}

// sent records the outcome of a send to p.
func (a *agreement) sent(p int, err error) {
	if err == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case errors.Is(err, transport.ErrEvicted):
		if a.evicted == nil {
			a.evicted = fmt.Errorf("survivors: send to rank %d: %w", p, err)
		}
	case errors.Is(err, transport.ErrPeerLost):
		a.sendLost[p] = true
	}
}

func (a *agreement) tag(round int) transport.Tag {
	return transport.CollTag(a.group, uint64(round), 0, 0)
}

// received is one peer's message of a round, or ErrPeerLost.
type received struct {
	decided bool
	lost    []bool
	err     error
}

// recvAll receives this round's message from each peer of from, at once.
// A peer lost is a result; any other failure (ctx, this rank evicted or
// closed, a malformed message) ends the agreement.
func (a *agreement) recvAll(ctx context.Context, round int, from []int) ([]received, error) {
	got := make([]received, len(from))
	errs := make([]error, len(from))
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, p := range from {
		wg.Go(func() {
			buf := make([]byte, lostMsgSize(a.n))
			err := a.t.Recv(rctx, p, a.tag(round), buf)
			switch {
			case err == nil:
				got[i].decided, got[i].lost, err = decodeLost(buf, a.n)
			case errors.Is(err, transport.ErrPeerLost) && !errors.Is(err, transport.ErrEvicted):
				got[i].err = err
				return
			}
			if err != nil {
				errs[i] = fmt.Errorf("survivors: round %d: receive from rank %d: %w", round, p, err)
				cancel() // no need to wait for the others
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("survivors: round %d: %w", round, transport.CtxError(ctx))
	}
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err
		}
	}
	return got, errors.Join(errs...)
}

// evictedErr is why this rank's transport refuses it, nil if it does not.
func (a *agreement) evictedErr() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.evicted
}

// takeSendLosses puts the peers a send found lost in L, reporting whether
// that changed L.
func (a *agreement) takeSendLosses() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	for p, l := range a.sendLost {
		if l && !a.lost[p] {
			a.lost[p], changed = true, true
		}
	}
	return changed
}

// finish waits, bounded by ctx, for the sends to takers, the peers that
// receive this rank's last message; the others' are cancelled on return.
func (a *agreement) finish(ctx context.Context, takers []int) error {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range takers {
			a.toPeer[p].Wait()
		}
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		a.cancel()
		<-done
		return fmt.Errorf("survivors: the last round's sends: %w", transport.CtxError(ctx))
	}
}

// lostMsgSize is the size of an agreement message among n ranks: a flag
// byte (1: a decision) and a bit per rank (set: lost).
func lostMsgSize(n int) int { return 1 + (n+7)/8 }

func encodeLost(decided bool, lost []bool) []byte {
	b := make([]byte, lostMsgSize(len(lost)))
	if decided {
		b[0] = 1
	}
	for r, l := range lost {
		if l {
			b[1+r/8] |= 1 << (r % 8)
		}
	}
	return b
}

func decodeLost(b []byte, n int) (decided bool, lost []bool, err error) {
	if len(b) != lostMsgSize(n) || b[0] > 1 {
		return false, nil, fmt.Errorf("survivors: a malformed message (flag %d, %d bytes): %w", b[0], len(b), ErrMismatch)
	}
	lost = make([]bool, n)
	for r := range lost {
		lost[r] = b[1+r/8]&(1<<(r%8)) != 0
	}
	return b[0] == 1, lost, nil
}
