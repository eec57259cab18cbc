package collectives_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/internal/testenv"
	"github.com/choreo-gpu/choreo/streams"
)

// TestOneErrorModel: for each way a collective can fail, the error matches
// the public sentinel wherever the caller meets it (the returned error, the
// output array, Group.Wait), and names the call once, not once per layer.
func TestOneErrorModel(t *testing.T) {
	type failure struct {
		ret  error        // what the call returned
		out  *array.Array // its output, if any
		wait *collectives.Group
	}
	// The cases that want the deadline get a short one; the others a
	// generous one, so that on a loaded machine their cause, not the
	// deadline, is what fails them.
	short, generous := collectives.WithTimeout(300*time.Millisecond), collectives.WithTimeout(30*time.Second)
	cases := []struct {
		name string
		want error
		run  func(t *testing.T, w *world) failure
	}{
		{"peer never arrives", collectives.ErrTimeout, func(t *testing.T, w *world) failure {
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
			return failure{err, y, w.groups[0]}
		}},
		{"input never completes", collectives.ErrTimeout, func(t *testing.T, w *world) failure {
			release := testenv.Hold(t, w.s[0])
			t.Cleanup(release)
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1) // behind the hold
			y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
			x1, _ := array.Full(w.s[1], []int{4}, array.Float32, 1)
			_, _ = w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
			return failure{err, y, w.groups[0]}
		}},
		{"shapes differ", collectives.ErrShapeMismatch, func(t *testing.T, w *world) failure {
			x0, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			x1, _ := array.Full(w.s[1], []int{5}, array.Float32, 1)
			y, err := w.groups[0].AllReduce(w.s[0], x0, collectives.Sum)
			_, _ = w.groups[1].AllReduce(w.s[1], x1, collectives.Sum)
			return failure{err, y, w.groups[0]}
		}},
		{"ops differ", collectives.ErrMismatch, func(t *testing.T, w *world) failure {
			x0, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			x1, _ := array.Full(w.s[1], []int{4}, array.Float32, 1)
			y, err := w.groups[0].AllReduce(w.s[0], x0, collectives.Sum)
			_, _ = w.groups[1].AllGather(w.s[1], x1)
			return failure{err, y, w.groups[0]}
		}},
		{"unknown reduce op", collectives.ErrBadOp, func(t *testing.T, w *world) failure {
			var ys []*array.Array
			var e error
			for r := range 2 {
				x, _ := array.Full(w.s[r], []int{4}, array.Float32, 1)
				y, err := w.groups[r].AllReduce(w.s[r], x, collectives.Op(99))
				ys, e = append(ys, y), errors.Join(e, err)
			}
			return failure{e, ys[0], w.groups[0]}
		}},
		{"peer out of range", collectives.ErrBadPeer, func(t *testing.T, w *world) failure {
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			return failure{w.groups[0].Send(w.s[0], x, 7), nil, w.groups[0]}
		}},
		{"over the size limit", collectives.ErrTooLarge, func(t *testing.T, w *world) failure {
			g, err := collectives.Local(w.rt, 2, collectives.WithMaxBytes(8))
			if err != nil {
				t.Fatal(err)
			}
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			y, err := g[0].AllReduce(w.s[0], x, collectives.Sum)
			return failure{err, y, g[0]}
		}},
		{"own group closed", collectives.ErrClosed, func(t *testing.T, w *world) failure {
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
			time.Sleep(20 * time.Millisecond)
			_ = w.groups[0].Close()
			return failure{err, y, nil}
		}},
		{"peer left", collectives.ErrPeerLost, func(t *testing.T, w *world) failure {
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
			time.Sleep(20 * time.Millisecond)
			_ = w.groups[1].Close()
			return failure{err, y, w.groups[0]}
		}},
		{"peer's input failed", collectives.ErrAborted, func(t *testing.T, w *world) failure {
			x0, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			y, err := w.groups[0].AllReduce(w.s[0], x0, collectives.Sum)
			_, _ = w.groups[1].AllReduce(w.s[1], nil, collectives.Sum)
			return failure{err, y, w.groups[0]}
		}},
		{"input freed", collectives.ErrFreed, func(t *testing.T, w *world) failure {
			x, _ := array.Full(w.s[0], []int{4}, array.Float32, 1)
			_ = x.Free()
			y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
			return failure{err, y, w.groups[0]}
		}},
		{"input on another stream, pending", collectives.ErrCrossStream, func(t *testing.T, w *world) failure {
			s2, _ := streams.NewGPU(w.rt, w.dev)
			release := testenv.Hold(t, s2)
			t.Cleanup(release)
			x, _ := array.Full(s2, []int{4}, array.Float32, 1)
			y, err := w.groups[0].AllReduce(w.s[0], x, collectives.Sum)
			return failure{err, y, w.groups[0]}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			timeout := generous
			if c.want == collectives.ErrTimeout {
				timeout = short
			}
			w := newWorld(t, 2, timeout)
			f := c.run(t, w)
			var got []string
			check := func(where string, err error) {
				if err == nil {
					return
				}
				got = append(got, where)
				t.Logf("%s: %v", where, err)
				if !errors.Is(err, c.want) {
					t.Errorf("%s: %v\ndoes not match %v", where, err, c.want)
				}
				if n := strings.Count(err.Error(), "fence released"); n > 1 {
					t.Errorf("%s: the fence's release is told %d times: %v", where, n, err)
				}
			}
			check("returned", f.ret)
			if f.out != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				err := f.out.Wait(ctx)
				if err == nil {
					t.Fatal("the output succeeded")
				}
				check("output", err)
			}
			if f.wait != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				check("Group.Wait", f.wait.Wait(ctx))
			}
			if len(got) == 0 {
				t.Fatal("the failure reached the caller nowhere")
			}
		})
	}
}
