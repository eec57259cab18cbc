//go:build linux

package cuda

import (
	"runtime"
	"sync"

	"github.com/choreo-gpu/choreo/internal/spin"
)

// driverThread is a goroutine locked to one OS thread on which the
// device's primary context was made current once (cuCtxSetCurrent). A CUDA
// context is current per OS thread and Go moves goroutines between
// threads, so driver calls that need the context run on such a thread
// (handed over with call: the device's "main" and "reaper" threads) or
// inside onContext. The goroutine never unlocks its thread, so when it
// exits the runtime retires the thread together with its context binding.
type driverThread struct {
	name string
	work chan func()
	exit chan struct{} // closed when the goroutine has returned

	mu     sync.RWMutex // held for reading by call, for writing by stop
	closed bool
}

// threadIdle is how an idle driver thread polls for work before it parks:
// parking a locked OS thread puts it to sleep in the kernel, and waking it
// costs more than most work handed to it. It never yields (Alone ==
// Spin): runtime.Gosched on a locked thread would hand the thread off.
var threadIdle = spin.Policy{Spin: idleSpin, Alone: idleSpin}

// startThread starts a driver thread that serves call until stop.
func startThread(a *api, ctx cuContext, name string) (*driverThread, error) {
	t := &driverThread{name: name, work: make(chan func(), 64), exit: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(t.exit)
		runtime.LockOSThread() // never unlocked: see the type's comment
		if err := a.errorf("cuCtxSetCurrent", a.cuCtxSetCurrent(ctx)); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for {
			threadIdle.Until(func() bool { return len(t.work) > 0 })
			f, ok := <-t.work
			if !ok {
				return
			}
			f()
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

// onContext runs f on the calling goroutine with its OS thread locked and
// ctx current on that thread, for driver work that must not wait for a hop
// to a driver thread (a queue's issuing and stream queries). A thread that
// had another context current gets it back afterwards, so a driver thread
// of another device that calls in is left as it was; a thread that had
// none keeps ctx, which is harmless to this package: every driver call of
// it runs on a driver thread or inside onContext, and both make their
// context current first. (Other CUDA code in the process, through cgo,
// must likewise set its own context rather than rely on a thread's.)
func onContext(a *api, ctx cuContext, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var prev cuContext
	if err := a.errorf("cuCtxGetCurrent", a.cuCtxGetCurrent(&prev)); err != nil {
		return err
	}
	if prev != ctx {
		if err := a.errorf("cuCtxSetCurrent", a.cuCtxSetCurrent(ctx)); err != nil {
			return err
		}
		if prev != 0 {
			defer a.cuCtxSetCurrent(prev)
		}
	}
	return f()
}

// startLoop runs body on a new driver thread and returns once the context
// is current there (or with the error that kept it from becoming so).
// done is closed when body has returned.
func startLoop(a *api, ctx cuContext, body func()) (done <-chan struct{}, err error) {
	exit := make(chan struct{})
	ready := make(chan error, 1)
	go func() {
		defer close(exit)
		runtime.LockOSThread() // never unlocked: see driverThread
		if err := a.errorf("cuCtxSetCurrent", a.cuCtxSetCurrent(ctx)); err != nil {
			ready <- err
			return
		}
		ready <- nil
		body()
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return exit, nil
}

// call runs f on the driver thread t and returns its results. It returns
// a gpu.ErrClosed error if t was stopped. f must not call back into t.
func call[T any](t *driverThread, f func() (T, error)) (T, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		var zero T
		return zero, closedf("%s thread stopped", t.name)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	t.work <- func() {
		v, err := f()
		ch <- result{v, err}
	}
	r := <-ch
	return r.v, r.err
}

// do is call for functions that return only an error.
func do(t *driverThread, f func() error) error {
	_, err := call(t, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// post queues f on t without waiting for it; it reports false if t was
// stopped (f then does not run).
func (t *driverThread) post(f func()) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if t.closed {
		return false
	}
	t.work <- f
	return true
}

// stop lets the calls in progress finish, then ends the thread. Idempotent.
func (t *driverThread) stop() {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		close(t.work)
	}
	t.mu.Unlock()
	<-t.exit
}
