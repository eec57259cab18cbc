package main

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// flooder holds a number of silent connections on each target it is
// given: each connection is dialled, reads (and ignores) whatever the far
// end sends, never writes, and is redialled as soon as the far end closes
// it, until stop; a dial that fails is retried after a backoff (10 ms,
// doubling to 500 ms). Safe for concurrent use.
type flooder struct {
	ctx    context.Context
	cancel context.CancelFunc
	per    int
	wg     sync.WaitGroup

	mu      sync.Mutex
	targets map[target]bool

	dials, closed, refused atomic.Int64
}

// newFlooder is a flooder of per connections a target.
func newFlooder(per int) *flooder {
	ctx, cancel := context.WithCancel(context.Background())
	return &flooder{ctx: ctx, cancel: cancel, per: per, targets: make(map[target]bool)}
}

// add floods t unless it is flooded already: one probe dials it every
// 10 ms until it accepts (a control port is known before its rank
// listens), then per connections are held on it.
func (f *flooder) add(t target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.targets[t] || f.ctx.Err() != nil {
		return
	}
	f.targets[t] = true
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		d := net.Dialer{Timeout: 2 * time.Second}
		for f.ctx.Err() == nil {
			c, err := d.DialContext(f.ctx, t.network, t.addr)
			if err == nil {
				rst(c)
				_ = c.Close()
				break
			}
			sleepCtx(f.ctx, 10*time.Millisecond)
		}
		for range f.per {
			f.wg.Add(1)
			go f.hold(t)
		}
	}()
}

// flooded is the targets so far.
func (f *flooder) flooded() []target {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]target, 0, len(f.targets))
	for t := range f.targets {
		out = append(out, t)
	}
	return out
}

// hold is one connection's loop.
func (f *flooder) hold(t target) {
	defer f.wg.Done()
	buf := make([]byte, 256)
	d := net.Dialer{Timeout: 2 * time.Second}
	backoff := 10 * time.Millisecond
	for f.ctx.Err() == nil {
		c, err := d.DialContext(f.ctx, t.network, t.addr)
		if err != nil {
			// Closed (the group formed), or out of local ports: try again,
			// less often each time, so that a closed listener costs little.
			f.refused.Add(1)
			sleepCtx(f.ctx, backoff)
			backoff = min(2*backoff, 500*time.Millisecond)
			continue
		}
		backoff = 10 * time.Millisecond
		f.dials.Add(1)
		rst(c)
		stop := context.AfterFunc(f.ctx, func() { _ = c.Close() })
		for {
			if _, err := c.Read(buf); err != nil {
				break
			}
		}
		stop()
		_ = c.Close()
		if f.ctx.Err() == nil {
			f.closed.Add(1)
		}
	}
}

// stop ends every connection and waits (up to 10 s) for the loops.
func (f *flooder) stop() {
	f.cancel()
	done := make(chan struct{})
	go func() {
		f.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
	}
}

// rst makes c's close a reset, so that the harness's side keeps no
// TIME_WAIT entry and its dials do not run out of local ports.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
