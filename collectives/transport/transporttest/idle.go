package transporttest

import (
	"context"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
)

func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Skip("getrusage:", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// longWaitDoesNotSpin checks, for a transport that polls before it parks,
// that a Recv on r0 whose message from r1 comes late polls for its budget
// only, then blocks: the process spends a small part of the wait on a CPU.
// The caller turns polling on first.
func longWaitDoesNotSpin(t *testing.T, r0, r1 transport.Transport) {
	const wait = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A first message, so that the connections are idle and the Recv
	// below waits on its own goroutine.
	warm := transport.Tag{Group: 77, Seq: 0}
	if err := r1.Send(ctx, r0.Rank(), warm, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := r0.Recv(ctx, r1.Rank(), warm, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	// A spinning wait burns most of its 300 ms on a CPU, every time;
	// whatever else the process does meanwhile (the race detector's work,
	// an earlier test's goroutines winding down) comes and goes. So the
	// earlier tests' garbage is collected first, outside the measure, and
	// the wait is tried up to three times and fails only if every try was
	// over the bound.
	var cpu, took time.Duration
	for try := range 3 {
		runtime.GC()
		time.Sleep(50 * time.Millisecond)
		tag := transport.Tag{Group: 77, Seq: uint64(1 + try)}
		sent := make(chan error, 1)
		go func() {
			time.Sleep(wait)
			sent <- r1.Send(ctx, r0.Rank(), tag, make([]byte, 4096))
		}()
		c0, t0 := cpuTime(t), time.Now()
		if err := r0.Recv(ctx, r1.Rank(), tag, make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		cpu, took = cpuTime(t)-c0, time.Since(t0)
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		t.Logf("waited %v on %v of CPU", took, cpu)
		if cpu <= took/10 {
			return
		}
	}
	t.Fatalf("a wait of %v took %v of CPU, three times over: polling did not stop", took, cpu)
}
