package tcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// waiter is a Wait on a connection that another reader reads: that reader
// wakes it once its ready turns, as do Wake, the connection's end and the
// heartbeat.
type waiter struct {
	ready func() bool
	ch    chan struct{} // closed once woken
	woken atomic.Bool
}

func (w *waiter) wake() {
	if w.woken.CompareAndSwap(false, true) {
		close(w.ch)
	}
}

// startLocked starts a reader goroutine with the given deadline. c.mu is
// held.
func (c *conn) startLocked(deadline time.Time) {
	_ = c.nc.SetReadDeadline(deadline)
	c.kicked = false
	c.lingering = false
	if c.l.goAdd(c.readLoop) {
		c.reading = true
	}
}

// drain is the heartbeat's reading of an idle connection: a reader
// goroutine, if none runs, that reads for drainLinger from when it runs
// (a late start must not leave a talking peer silent to the heartbeat).
func (c *conn) drain() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading || c.dead {
		return
	}
	c.kicked = false
	c.lingering = true
	if c.l.goAdd(func() {
		c.mu.Lock()
		if !c.kicked {
			_ = c.nc.SetReadDeadline(time.Now().Add(drainLinger))
		}
		c.mu.Unlock()
		c.readLoop()
	}) {
		c.reading = true
	}
}

// await registers an operation that waits for a reader of c to deliver
// its frame; it starts no reader (the operation's Wait reads, or hands c
// to a reader goroutine).
func (c *conn) await() { c.waiters.Add(1) }

// unwait ends what await began; the last one kicks a reader goroutine
// that may now wait for no one, freeing c for a Recv's own reading.
func (c *conn) unwait() {
	if c.waiters.Add(-1) == 0 {
		c.kick()
	}
}

// stopIfIdle ends a reader goroutine's reading, between frames, when
// nothing waits on it and it does not linger, and reports whether it did.
func (c *conn) stopIfIdle() bool {
	if c.left > 0 || c.hn > 0 {
		return false // a frame is coming in: finish it
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.dead:
	case c.waiters.Load() > 0 || c.lingering:
		return false
	case c.bulk:
		c.lingerLocked()
		return false
	}
	c.reading = false
	return true
}

func (c *conn) lingerLocked() {
	c.lingering = true
	c.readSince = false
	_ = c.nc.SetReadDeadline(time.Now().Add(linger))
}

// kick wakes the reader out of a blocked read.
func (c *conn) kick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reading && !c.dead {
		c.kicked = true
		_ = c.nc.SetReadDeadline(aLongTimeAgo)
	}
}

func (c *conn) touch(n int) {
	c.lastRead.Store(c.l.now())
	c.rx.Add(int64(n))
	c.readSince = true
}

// readLoop is the reader goroutine: it reads while operations wait on it.
func (c *conn) readLoop() {
	for {
		err := c.step()
		c.notify()
		if err == nil {
			if c.waiters.Load() == 0 && c.stopIfIdle() {
				return
			}
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			c.failed(err)
			return
		}
		c.mu.Lock()
		lingered := c.lingering
		c.kicked, c.lingering = false, false
		switch {
		case c.dead:
		case c.waiters.Load() > 0 || c.left > 0 || c.hn > 0:
			_ = c.nc.SetReadDeadline(time.Time{})
			c.mu.Unlock()
			continue
		case lingered && c.bulk && c.readSince:
			c.lingerLocked() // large frames still come
			c.mu.Unlock()
			continue
		}
		c.reading = false
		c.mu.Unlock()
		return
	}
}

// failed ends c's reading after a read error (not a deadline): c is dead
// and, unless it was already, its link goes down.
func (c *conn) failed(err error) {
	c.mu.Lock()
	c.reading = false
	dead := c.dead
	c.dead = true
	c.mu.Unlock()
	c.wakeAll()
	if dead {
		return
	}
	var pe protoError
	switch {
	case errors.As(err, &pe):
		c.l.lose(err)
	case errors.Is(err, io.EOF):
		c.l.ended(c, readError(err))
	default:
		c.l.lose(readError(err))
	}
}

func readError(err error) error {
	if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return fmt.Errorf("connection closed: %w", err)
	}
	return fmt.Errorf("read: %w", err)
}

// wait returns once ready holds, ctx ends or c is dead, reading c itself
// meanwhile when no reader owns it, else waiting on that reader.
func (c *conn) wait(ctx context.Context, ready func() bool) {
	if ready() {
		return
	}
	w, own := c.enter(ready)
	switch {
	case own:
		c.readUntil(ctx, ready)
	case w != nil:
		if !spin.Until(spin.Budget(), func() bool { return w.woken.Load() || ready() }) {
			select {
			case <-w.ch:
			case <-ctx.Done():
			}
		}
		c.leave(w)
	}
}

// enter makes the caller c's reader when none runs (own), else registers
// a waiter with the reader that runs; neither on a dead c.
func (c *conn) enter(ready func() bool) (w *waiter, own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return nil, false
	}
	if !c.reading {
		c.reading = true
		c.kicked, c.lingering = false, false
		_ = c.nc.SetReadDeadline(time.Time{}) // a former reader's may be left
		return nil, true
	}
	w = &waiter{ready: ready, ch: make(chan struct{})}
	c.ws = append(c.ws, w)
	c.nws.Add(1)
	c.waiters.Add(1)
	return w, false
}

// leave ends what enter registered, unless the reader that woke w did.
func (c *conn) leave(w *waiter) {
	if c.drop(w) {
		c.unwait()
	}
}

// drop removes w from the waiters and reports whether it was there (its
// count in c.waiters is then the caller's to lower).
func (c *conn) drop(w *waiter) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := slices.Index(c.ws, w)
	if i < 0 {
		return false
	}
	c.ws = slices.Delete(c.ws, i, i+1)
	c.nws.Add(-1)
	return true
}

// readUntil reads c on the calling goroutine until ready holds, ctx ends
// or c dies, polling first (see poll.go); then it hands c to a reader
// goroutine if operations wait on one or a frame is half read.
func (c *conn) readUntil(ctx context.Context, ready func() bool) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, c.kick)
		defer stop()
	}
	poll := c.l.poll
	budget := poll.Budget()
	c.nowait = budget > 0
	var clock spin.PollClock
	start := time.Now()
	for !ready() && ctx.Err() == nil {
		err := c.step()
		c.notify()
		switch {
		case err == nil:
		case err == errWouldBlock:
			if !clock.More(poll, budget) {
				c.nowait = false
			}
		case errors.Is(err, os.ErrDeadlineExceeded):
			if !c.unkick() {
				c.nowait = false
				return
			}
		default:
			c.nowait = false
			c.failed(err)
			return
		}
	}
	c.nowait = false
	poll.Waited(time.Since(start))
	c.mu.Lock()
	c.reading = false
	if !c.dead && (c.waiters.Load() > 0 || c.left > 0 || c.hn > 0) {
		c.startLocked(time.Time{})
	}
	c.mu.Unlock()
}

// unkick clears a kick's deadline so that the reader reads on; on a dead
// c it ends the reading instead and returns false.
func (c *conn) unkick() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		c.reading = false
		return false
	}
	c.kicked = false
	_ = c.nc.SetReadDeadline(time.Time{})
	return true
}

// notify wakes the waiters whose ready holds and stops counting them.
func (c *conn) notify() {
	if c.nws.Load() == 0 {
		return
	}
	for _, w := range c.waiting() {
		if w.ready() && c.drop(w) {
			c.waiters.Add(-1)
			w.wake()
		}
	}
}

func (c *conn) wakeAll() {
	for _, w := range c.waiting() {
		w.wake()
	}
}

func (c *conn) waiting() []*waiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ws)
}
