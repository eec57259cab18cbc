package main

import (
	"context"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/array"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// clockRounds is how many round trips each rank makes to rank 0 when the
// clocks are measured; the fastest one's estimate is kept.
const clockRounds = 8

// measureClock estimates how far this rank's wall clock is ahead of rank
// 0's, as NTP does, over the group just joined: each rank other than 0, in
// turn, sends rank 0 a probe and gets rank 0's clock reading back; with
// the probe sent at t1 and the answer in at t3 (this rank's clock) and
// rank 0's reading t2, the offset is (t1+t3)/2 - t2, off by at most half
// the round trip, so the fastest round's estimate is kept. Every rank of
// the group must call it, at the same point.
func measureClock(ctx context.Context, g *collectives.Group, s *streams.GPU) (time.Duration, error) {
	one := []int{1}
	if g.Rank() == 0 {
		for r := 1; r < g.Size(); r++ {
			for range clockRounds {
				y, err := g.Recv(s, one, gpu.Int64, r)
				if err == nil {
					err = y.Wait(ctx)
					_ = y.Free()
				}
				if err != nil {
					return 0, fmt.Errorf("clock: rank %d: %w", r, err)
				}
				x, err := array.FromSlice(s, []int64{time.Now().UnixNano()})
				if err == nil {
					err = g.Send(s, x, r)
					_ = x.Free()
				}
				if err != nil {
					return 0, fmt.Errorf("clock: rank %d: %w", r, err)
				}
			}
		}
		return 0, nil
	}
	best, off := time.Duration(-1), time.Duration(0)
	for range clockRounds {
		probe, err := array.Full(s, one, gpu.Int64, 0)
		if err != nil {
			return 0, fmt.Errorf("clock: %w", err)
		}
		if err := probe.Wait(ctx); err != nil {
			return 0, fmt.Errorf("clock: %w", err)
		}
		t1 := time.Now().UnixNano()
		err = g.Send(s, probe, 0)
		var y *array.Array
		if err == nil {
			y, err = g.Recv(s, one, gpu.Int64, 0)
		}
		var t2 []int64
		if err == nil {
			t2, err = array.ToSlice[int64](ctx, y)
			_ = y.Free()
		}
		t3 := time.Now().UnixNano()
		_ = probe.Free()
		if err != nil {
			return 0, fmt.Errorf("clock: %w", err)
		}
		if rtt := time.Duration(t3 - t1); best < 0 || rtt < best {
			best, off = rtt, time.Duration((t1+t3)/2-t2[0])
		}
	}
	return off, nil
}
