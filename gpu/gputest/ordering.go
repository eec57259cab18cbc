package gputest

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// Sizes of the ordering test: queues under test, goroutines submitting to
// each, batches per goroutine.
const (
	ordQueues     = 2
	ordSubmitters = 4
	ordPerSub     = 50
	ordTotal      = ordSubmitters * ordPerSub
)

// testOrdering: several goroutines submit batches to each of two queues at
// once. Every batch first copies a "previous" slot into its log entry, then
// overwrites the slot with its own number, for two chains: one per
// submitter and one for the whole queue (submission order fixed by a mutex
// held around Submit). A queue that runs batches out of submission order,
// interleaves them or reorders commands within one, leaves a log entry
// that is not its predecessor's number. done must also come in order.
func testOrdering(t *testing.T, open func(t *testing.T) gpu.Device) {
	r := newRig(t, open)
	setup := r.queue()
	// consts[i] = i, the values batches copy into slots.
	consts := r.alloc(4*(ordTotal+1), gpu.DeviceMem)
	r.mustRun(setup, gpu.Arange{Dst: consts, DType: gpu.Int32, N: ordTotal + 1, Start: gpu.Int(0), Step: gpu.Int(1)})

	lanes := make([]*ordLane, ordQueues)
	for i := range lanes {
		lanes[i] = newOrdLane(r)
	}
	var wg sync.WaitGroup
	for _, l := range lanes {
		for s := range ordSubmitters {
			wg.Go(func() {
				for j := range ordPerSub {
					l.submit(consts, s, j)
				}
			})
		}
	}
	wg.Wait()
	for qi, l := range lanes {
		l.check(r, setup, qi)
	}
}

// ordLane is one queue under test with its buffers, its submission order
// (mu, next) and what its done callbacks saw.
type ordLane struct {
	q             gpu.Queue
	prevS, logS   gpu.Buffer // per submitter: slot s, log s*ordPerSub+j
	prevG, logG   gpu.Buffer // whole queue: one slot, log k
	mu            sync.Mutex // orders Submit and assigns k
	next          int
	doneMu        sync.Mutex
	doneS         [ordSubmitters][]int
	doneG         []int
	submitErrs    []error
	completions   []*completion
	completionsMu sync.Mutex
}

func newOrdLane(r *rig) *ordLane {
	return &ordLane{
		q:     r.queue(),
		prevS: r.alloc(4*ordSubmitters, gpu.DeviceMem),
		logS:  r.alloc(4*ordTotal, gpu.DeviceMem),
		prevG: r.alloc(4, gpu.DeviceMem),
		logG:  r.alloc(4*ordTotal, gpu.DeviceMem),
	}
}

// submit submits submitter s's batch j: it logs both chains' previous
// numbers and writes its own (j+1 on s's chain, k+1 on the queue's, where
// k is its place in submission order). Safe for concurrent use.
func (l *ordLane) submit(consts gpu.Buffer, s, j int) {
	at := func(i int) int { return 4 * i }
	l.mu.Lock()
	k := l.next
	l.next++
	cmds := []gpu.Command{
		gpu.Copy{Dst: l.logS, DstOff: at(s*ordPerSub + j), Src: l.prevS, SrcOff: at(s), Bytes: 4},
		gpu.Copy{Dst: l.prevS, DstOff: at(s), Src: consts, SrcOff: at(j + 1), Bytes: 4},
		gpu.Copy{Dst: l.logG, DstOff: at(k), Src: l.prevG, Bytes: 4},
		gpu.Copy{Dst: l.prevG, Src: consts, SrcOff: at(k + 1), Bytes: 4},
	}
	c := newCompletion()
	err := l.q.Submit(cmds, func(err error) {
		l.doneMu.Lock()
		l.doneS[s] = append(l.doneS[s], j)
		l.doneG = append(l.doneG, k)
		l.doneMu.Unlock()
		c.done(err)
	})
	l.mu.Unlock()
	l.completionsMu.Lock()
	if err != nil {
		l.submitErrs = append(l.submitErrs, err)
	} else {
		l.completions = append(l.completions, c)
	}
	l.completionsMu.Unlock()
}

// check fails the test unless every batch of queue qi succeeded, done
// came in submission order on both chains, and each log entry is its
// predecessor's number. Test goroutine only, after every submit returned.
func (l *ordLane) check(r *rig, setup gpu.Queue, qi int) {
	t := r.t
	t.Helper()
	if len(l.submitErrs) > 0 {
		t.Fatalf("queue %d: Submit: %v", qi, l.submitErrs[0])
	}
	for _, c := range l.completions {
		if err := r.wait(c); err != nil {
			t.Fatalf("queue %d: batch failed: %v", qi, err)
		}
	}
	l.doneMu.Lock()
	for s := range ordSubmitters {
		if err := inOrder(l.doneS[s], ordPerSub); err != nil {
			t.Errorf("queue %d submitter %d: done order: %v", qi, s, err)
		}
	}
	if err := inOrder(l.doneG, ordTotal); err != nil {
		t.Errorf("queue %d: done order: %v", qi, err)
	}
	l.doneMu.Unlock()

	logS := int32s(r.read(setup, l.logS, 0, 4*ordTotal))
	for s := range ordSubmitters {
		for j := range ordPerSub {
			if got := logS[s*ordPerSub+j]; got != int32(j) {
				t.Fatalf("queue %d submitter %d batch %d saw its predecessor as %d, want %d",
					qi, s, j, got, j)
			}
		}
	}
	logG := int32s(r.read(setup, l.logG, 0, 4*ordTotal))
	for k, got := range logG {
		if got != int32(k) {
			t.Fatalf("queue %d: batch %d in submission order saw its predecessor as %d, want %d",
				qi, k, got, k)
		}
	}
}

// inOrder checks that seq is 0, 1, ..., n-1.
func inOrder(seq []int, n int) error {
	if len(seq) != n {
		return fmt.Errorf("%d completions, want %d", len(seq), n)
	}
	for i, v := range seq {
		if v != i {
			return fmt.Errorf("completion %d is batch %d", i, v)
		}
	}
	return nil
}

func int32s(b []byte) []int32 {
	out := make([]int32, len(b)/4)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
