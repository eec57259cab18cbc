package spin

import (
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkUntilReady is the cost of a wait whose condition already holds.
func BenchmarkUntilReady(b *testing.B) {
	ready := func() bool { return true }
	for b.Loop() {
		Until(50*time.Microsecond, ready)
	}
}

// BenchmarkUntilPolls is the cost of a wait that polls 1000 times: the
// loop's own overhead per poll, without a second goroutine.
func BenchmarkUntilPolls(b *testing.B) {
	for b.Loop() {
		n := 0
		Until(time.Second, func() bool { n++; return n == 1000 })
	}
}

// BenchmarkUntilHandoff is a ping-pong between two goroutines that each
// poll (up to 50 us) for the other's store before parking on a channel.
func BenchmarkUntilHandoff(b *testing.B) {
	var turn atomic.Int64
	wake := [2]chan struct{}{make(chan struct{}, 1), make(chan struct{}, 1)}
	play := func(me int64, n int) {
		for i := 0; i < n; i++ {
			want := 2*int64(i) + me
			if !Until(50*time.Microsecond, func() bool { return turn.Load() == want }) {
				for turn.Load() != want {
					<-wake[me]
				}
			}
			turn.Add(1)
			select {
			case wake[1-me] <- struct{}{}:
			default:
			}
		}
	}
	done := make(chan struct{})
	go func() { play(1, b.N); close(done) }()
	play(0, b.N)
	<-done
}
