package gputest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// Timeout bounds every wait of the suite: a batch's completion, a fence
// wait, a Close. A conforming backend needs a small fraction of it.
const Timeout = 10 * time.Second

// rig is one subtest's device with helpers that fail the test on error and
// release what they created when the subtest ends. Its methods must be
// called from the test goroutine unless stated otherwise.
type rig struct {
	t       *testing.T
	dev     gpu.Device
	clearer gpu.Queue // clears new device buffers (their contents start undefined)
}

// newRig opens a device for t and closes it when t ends (a second Close by
// the test itself is fine: its error is ignored).
func newRig(t *testing.T, open func(t *testing.T) gpu.Device) *rig {
	t.Helper()
	dev := open(t)
	if dev == nil {
		t.Fatal("gputest: open returned a nil device")
	}
	t.Cleanup(func() { _ = dev.Close() })
	return &rig{t: t, dev: dev}
}

// ctx returns a context bounded by Timeout, canceled when the test ends.
func (r *rig) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	r.t.Cleanup(cancel)
	return ctx
}

func (r *rig) queue() gpu.Queue {
	r.t.Helper()
	q, err := r.dev.NewQueue()
	if err != nil {
		r.t.Fatalf("NewQueue: %v", err)
	}
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		_ = q.Close(ctx)
	})
	return q
}

func (r *rig) alloc(n int, kind gpu.MemKind) gpu.Buffer {
	r.t.Helper()
	b, err := r.dev.Alloc(n, kind)
	if err != nil {
		r.t.Fatalf("Alloc(%d, %v): %v", n, kind, err)
	}
	if b.Len() != n || b.Kind() != kind {
		r.t.Fatalf("Alloc(%d, %v) gave a buffer of %d bytes, kind %v", n, kind, b.Len(), b.Kind())
	}
	r.t.Cleanup(func() { _ = b.Free() })
	if kind == gpu.DeviceMem && n > 0 {
		// Device memory starts undefined; the tests want a known start.
		if r.clearer == nil {
			r.clearer = r.queue()
		}
		zeros, err := r.dev.Alloc(n, gpu.HostMem)
		if err != nil {
			r.t.Fatalf("Alloc(%d, host): %v", n, err)
		}
		r.mustRun(r.clearer, gpu.Copy{Dst: b, Src: zeros, Bytes: n})
		_ = zeros.Free()
	}
	return b
}

// rawAlloc is alloc without the clearing, for tests of Alloc itself.
func (r *rig) rawAlloc(n int, kind gpu.MemKind) gpu.Buffer {
	r.t.Helper()
	b, err := r.dev.Alloc(n, kind)
	if err != nil {
		r.t.Fatalf("Alloc(%d, %v): %v", n, kind, err)
	}
	r.t.Cleanup(func() { _ = b.Free() })
	return b
}

func (r *rig) word() gpu.FenceWord {
	r.t.Helper()
	w, err := r.dev.NewFenceWord()
	if err != nil {
		r.t.Fatalf("NewFenceWord: %v", err)
	}
	if v := w.Load(); v != 0 {
		r.t.Fatalf("new fence word holds %d, want 0", v)
	}
	r.t.Cleanup(w.Free)
	return w
}

// completion is the done side of one submitted batch: it records how many
// times done was called and the first error.
type completion struct {
	calls atomic.Int32
	ch    chan error // capacity 1: the first call's error
}

func newCompletion() *completion { return &completion{ch: make(chan error, 1)} }

// done is the callback to pass to Submit; safe from any goroutine.
func (c *completion) done(err error) {
	if c.calls.Add(1) == 1 {
		c.ch <- err
	}
}

// submit submits cmds and returns the completion; a Submit error fails the
// test. When the test ends it checks that done was called at most once.
func (r *rig) submit(q gpu.Queue, cmds ...gpu.Command) *completion {
	r.t.Helper()
	c := newCompletion()
	if err := q.Submit(cmds, c.done); err != nil {
		r.t.Fatalf("Submit(%v): %v", cmds, err)
	}
	r.t.Cleanup(func() {
		if n := c.calls.Load(); n > 1 {
			r.t.Errorf("done called %d times for batch %v", n, cmds)
		}
	})
	return c
}

// wait waits (bounded) for the batch's done and returns its error.
func (r *rig) wait(c *completion) error {
	r.t.Helper()
	t := time.NewTimer(Timeout)
	defer t.Stop()
	select {
	case err := <-c.ch:
		c.ch <- err // keep it for a later wait
		return err
	case <-t.C:
		r.t.Fatalf("batch not completed within %v", Timeout)
		return nil
	}
}

// called reports whether done has been called yet.
func (c *completion) called() bool { return c.calls.Load() > 0 }

// run submits cmds, waits for done and returns its error.
func (r *rig) run(q gpu.Queue, cmds ...gpu.Command) error {
	r.t.Helper()
	return r.wait(r.submit(q, cmds...))
}

// mustRun is run that fails the test on error.
func (r *rig) mustRun(q gpu.Queue, cmds ...gpu.Command) {
	r.t.Helper()
	if err := r.run(q, cmds...); err != nil {
		r.t.Fatalf("batch %v failed: %v", cmds, err)
	}
}

// read copies n bytes of b from off into a fresh HostMem buffer on q and
// returns a copy of them.
func (r *rig) read(q gpu.Queue, b gpu.Buffer, off, n int) []byte {
	r.t.Helper()
	h := r.alloc(n, gpu.HostMem)
	r.mustRun(q, gpu.Copy{Dst: h, Src: b, SrcOff: off, Bytes: n})
	hb := h.Bytes()
	if len(hb) != n {
		r.t.Fatalf("HostMem buffer of %d bytes has Bytes() of length %d", n, len(hb))
	}
	return append([]byte(nil), hb...)
}

// upload returns a buffer of the given kind holding data, written through a
// HostMem staging buffer and a Copy on q.
func (r *rig) upload(q gpu.Queue, data []byte, kind gpu.MemKind) gpu.Buffer {
	r.t.Helper()
	h := r.alloc(len(data), gpu.HostMem)
	copy(h.Bytes(), data)
	b := r.alloc(len(data), kind)
	r.mustRun(q, gpu.Copy{Dst: b, Src: h, Bytes: len(data)})
	return b
}

// expectErr fails the test unless err wraps target.
func expectErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got error %v, want one wrapping %q", what, err, target)
	}
}

// waitWord waits (bounded by Timeout) for w >= v from the CPU.
func (r *rig) waitWord(w gpu.FenceWord, v uint32) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := w.Wait(ctx, v, nil); err != nil {
		r.t.Fatalf("fence wait for %d (word at %d): %v", v, w.Load(), err)
	}
}

// settle is how long tests let a backend run before they check that
// something has not happened (a wait that must hold).
const settle = 50 * time.Millisecond
