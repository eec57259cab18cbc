package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// measureFusedFloor is the bus bandwidth of the fastest all-reduce the
// device can run over n buffers of size bytes: one kernel that reduces
// every buffer's elements and writes the sum into every buffer, in place
// (each byte read once and written once per buffer, as the device path's
// all-reduce does over its ranks' streams). It is the best of 5 batches of
// 8 such kernels (bestBatch), float32 sums; ok is false on a device
// without peer kernels.
func measureFusedFloor(dev gpu.Device, n, size int) (busbw float64, ok bool, err error) {
	pd, isPeer := dev.(gpu.PeerDevice)
	if !isPeer || n < 2 || size < 4 {
		return 0, false, nil
	}
	q, err := dev.NewQueue()
	if err != nil {
		return 0, false, fmt.Errorf("fused floor: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = errors.Join(err, q.Close(ctx))
		cancel()
	}()
	tab, err := pd.NewPeerTable(n)
	if err != nil {
		return 0, false, fmt.Errorf("fused floor: %w", err)
	}
	defer tab.Free()
	for i := range n {
		b, err := dev.Alloc(size, gpu.DeviceMem)
		if err != nil {
			return 0, false, fmt.Errorf("fused floor: %w", err)
		}
		defer b.Free()
		if err := tab.Set(i, b); err != nil {
			return 0, false, fmt.Errorf("fused floor: %w", err)
		}
	}
	tab.Arm()
	count := size / 4
	const reps = 8
	cmds := make([]gpu.Command, reps)
	for i := range cmds {
		cmds[i] = gpu.PeerReduce{Table: tab, SrcLo: 0, SrcHi: n, DstLo: 0, DstHi: n, N: count, DType: gpu.Float32, Op: gpu.OpSum}
	}
	best, err := bestBatch(dev, q, cmds, 5)
	if err != nil {
		return 0, false, fmt.Errorf("fused floor: %w", err)
	}
	if err := tab.Err(); err != nil {
		return 0, false, fmt.Errorf("fused floor: %w", err)
	}
	algbw := float64(count*4) * reps / best.Seconds()
	return algbw * 2 * float64(n-1) / float64(n), true, nil
}

// bestBatch returns the fastest of rounds runs of cmds: on the GPU's own
// clock where dev times commands (gpu.CommandTimer: CUDA events around
// each run), else on q from submission to completion, one batch at a time
// (the completion's notice paid once per run).
func bestBatch(dev gpu.Device, q gpu.Queue, cmds []gpu.Command, rounds int) (time.Duration, error) {
	if ct, ok := dev.(gpu.CommandTimer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return ct.TimeCommands(ctx, cmds, rounds)
	}
	best := time.Duration(1<<63 - 1)
	for range rounds {
		done := make(chan error, 1)
		t0 := time.Now()
		if err := q.Submit(cmds, func(err error) { done <- err }); err != nil {
			return 0, err
		}
		select {
		case err := <-done:
			if err != nil {
				return 0, err
			}
		case <-time.After(time.Minute):
			return 0, errors.New("no completion within a minute")
		}
		best = min(best, time.Since(t0))
	}
	return best, nil
}

// clockOf says which clock bestBatch times dev's commands with.
func clockOf(dev gpu.Device) string {
	if _, ok := dev.(gpu.CommandTimer); ok {
		return "timed on the GPU"
	}
	return "timed on the host"
}
