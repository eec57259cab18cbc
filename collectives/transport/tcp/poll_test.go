package tcp

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/collectives/transport"
	"github.com/choreo-gpu/choreo/internal/spin"
)

// cpuTime is this process's CPU time so far.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Skip("getrusage:", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLongWaitDoesNotSpin: a Recv whose message comes late polls for its
// budget only, then blocks: the process spends a small part of the wait
// on a CPU.
func TestLongWaitDoesNotSpin(t *testing.T) {
	ts := build(t, 2, nil)
	defer func() {
		for _, tr := range ts {
			_ = tr.Close()
		}
	}()
	for _, tr := range ts {
		tr.poll.Init(spin.MaxPoll) // polling on, whatever this host's CPUs
	}
	const wait = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A first message, so that the connections are idle and the Recv
	// below waits on its own goroutine.
	warm := transport.Tag{Group: 77, Seq: 0}
	if err := ts[1].Send(ctx, 0, warm, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if err := ts[0].Recv(ctx, 1, warm, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	tag := transport.Tag{Group: 77, Seq: 1}
	sent := make(chan error, 1)
	go func() {
		time.Sleep(wait)
		sent <- ts[1].Send(ctx, 0, tag, make([]byte, 4096))
	}()
	c0, t0 := cpuTime(t), time.Now()
	if err := ts[0].Recv(ctx, 1, tag, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	cpu, took := cpuTime(t)-c0, time.Since(t0)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	t.Logf("waited %v on %v of CPU", took, cpu)
	if cpu > took/10 {
		t.Fatalf("a wait of %v took %v of CPU: polling did not stop", took, cpu)
	}
}
