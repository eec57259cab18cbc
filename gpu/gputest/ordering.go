package gputest

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// testOrdering: several goroutines submit batches to each of two queues at
// once. Every batch first copies a "previous" slot into its log entry, then
// overwrites the slot with its own number, for two chains: one per
// submitter and one for the whole queue (submission order fixed by a mutex
// held around Submit). A queue that runs batches out of submission order,
// interleaves them or reorders commands within one, leaves a log entry
// that is not its predecessor's number. done must also come in order.
func testOrdering(t *testing.T, open func(t *testing.T) gpu.Device) {
	const (
		queues     = 2
		submitters = 4
		perSub     = 50
		total      = submitters * perSub
	)
	r := newRig(t, open)
	setup := r.queue()
	// consts[i] = i, the values batches copy into slots.
	consts := r.alloc(4*(total+1), gpu.DeviceMem)
	r.mustRun(setup, gpu.Arange{Dst: consts, DType: gpu.Int32, N: total + 1, Start: gpu.Int(0), Step: gpu.Int(1)})
	at := func(i int) int { return 4 * i }

	// lane is one queue under test with its buffers, its submission order
	// (mu, next) and what its done callbacks saw.
	type lane struct {
		q             gpu.Queue
		prevS, logS   gpu.Buffer // per submitter: slot s, log s*perSub+j
		prevG, logG   gpu.Buffer // whole queue: one slot, log k
		mu            sync.Mutex // orders Submit and assigns k
		next          int
		doneMu        sync.Mutex
		doneS         [submitters][]int
		doneG         []int
		submitErrs    []error
		completions   []*completion
		completionsMu sync.Mutex
	}
	lanes := make([]*lane, queues)
	for i := range lanes {
		lanes[i] = &lane{
			q:     r.queue(),
			prevS: r.alloc(4*submitters, gpu.DeviceMem),
			logS:  r.alloc(4*total, gpu.DeviceMem),
			prevG: r.alloc(4, gpu.DeviceMem),
			logG:  r.alloc(4*total, gpu.DeviceMem),
		}
	}

	var wg sync.WaitGroup
	for _, l := range lanes {
		for s := range submitters {
			wg.Go(func() {
				for j := range perSub {
					l.mu.Lock()
					k := l.next
					l.next++
					cmds := []gpu.Command{
						gpu.Copy{Dst: l.logS, DstOff: at(s*perSub + j), Src: l.prevS, SrcOff: at(s), Bytes: 4},
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
			})
		}
	}
	wg.Wait()

	for qi, l := range lanes {
		if len(l.submitErrs) > 0 {
			t.Fatalf("queue %d: Submit: %v", qi, l.submitErrs[0])
		}
		for _, c := range l.completions {
			if err := r.wait(c); err != nil {
				t.Fatalf("queue %d: batch failed: %v", qi, err)
			}
		}
		l.doneMu.Lock()
		for s := range submitters {
			if err := inOrder(l.doneS[s], perSub); err != nil {
				t.Errorf("queue %d submitter %d: done order: %v", qi, s, err)
			}
		}
		if err := inOrder(l.doneG, total); err != nil {
			t.Errorf("queue %d: done order: %v", qi, err)
		}
		l.doneMu.Unlock()

		logS := int32s(r.read(setup, l.logS, 0, 4*total))
		for s := range submitters {
			for j := range perSub {
				if got := logS[s*perSub+j]; got != int32(j) {
					t.Fatalf("queue %d submitter %d batch %d saw its predecessor as %d, want %d",
						qi, s, j, got, j)
				}
			}
		}
		logG := int32s(r.read(setup, l.logG, 0, 4*total))
		for k, got := range logG {
			if got != int32(k) {
				t.Fatalf("queue %d: batch %d in submission order saw its predecessor as %d, want %d",
					qi, k, got, k)
			}
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
