package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"
)

// Probing bounds: how often each peer's control address is dialled while
// the data plane connects, and how long one dial may take.
const (
	probeEvery   = 200 * time.Millisecond
	probeTimeout = time.Second
	// probeGap is the least time between two probes of any one rank, all
	// peers together: each control server answers at most a probe every
	// probeGap, so in a large group probing all at once does not bury
	// the control handshakes it is meant to wait for.
	probeGap = 20 * time.Millisecond
)

// probeInterval is how often each peer is probed in a group of size
// ranks: probeEvery, longer in a group large enough that probeGap needs
// it (640 ms at 32 ranks, 1.28 s at 64).
func probeInterval(size int) time.Duration {
	return max(probeEvery, time.Duration(size)*probeGap)
}

// probes dials every peer's control address every probeInterval, from Watch
// until StopProbes (or Close): a dial refused means no process listens
// there any more (a rank's control plane listens from before its hello
// until it exits), so that peer is lost. It covers the time before the
// data plane is connected, when a rank may have no connection to a peer
// yet and protoactor's connect to a dead one reports it only after its 2 s
// retry sleep. A paused or slow peer's kernel still accepts the dial, and
// an unreachable host's dial times out: neither counts.
type probes struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// startProbes probes roster's peers (all but self), calling refused once
// for each whose dial is refused.
func startProbes(roster Roster, self int, refused func(rank int, cause error)) *probes {
	p := &probes{}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for _, m := range roster.Members {
		if m.Rank == self {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.probe(m, probeInterval(len(roster.Members)), refused)
		}()
	}
	return p
}

// probe dials m until a dial is refused or the probes stop.
func (p *probes) probe(m Member, every time.Duration, refused func(rank int, cause error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if cause := gone(p.ctx, m.Rank, m.Control); cause != nil && p.ctx.Err() == nil {
			refused(m.Rank, cause)
			return
		}
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gone dials rank's control address once (within probeTimeout and ctx):
// refused, no process listens there any more and it returns why; nil
// otherwise (accepted, or no answer: a paused process or a host out of
// reach).
func gone(ctx context.Context, rank int, addr string) error {
	dctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(dctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
		return nil
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("control plane: rank %d's address %s refuses connections: its process is gone", rank, addr)
	}
	return nil
}

// close stops the probes and waits for them (a dial in progress ends at
// once).
func (p *probes) close() {
	p.cancel()
	p.wg.Wait()
}
