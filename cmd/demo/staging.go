package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/choreo-gpu/choreo/gpu"
)

// stagingResult is the copy floor of a staged collective, measured in this
// run: every rank copies size bytes device->host and back host->device on
// a queue of its own, all ranks at once (they share the GPU's link; ranks
// in other processes measure at the same time).
type stagingResult struct {
	t     time.Duration // best of the repetitions, all ranks done
	busbw float64       // an all-reduce that took t would reach this
}

// measureStaging returns the floor of a group of ranks with lanes of them
// in this process, or ok=false on a device whose memory the CPU sees
// (nothing is staged there).
func measureStaging(dev gpu.Device, lanes, ranks, size int) (r stagingResult, ok bool, err error) {
	if dev.Properties().HostVisibleDeviceMem || lanes < 1 || size < 1 {
		return r, false, nil
	}
	type lane struct {
		q         gpu.Queue
		dev, host gpu.Buffer
	}
	ls := make([]lane, lanes)
	defer func() {
		for _, l := range ls {
			if l.q != nil {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err = errors.Join(err, l.q.Close(ctx))
				cancel()
			}
			for _, b := range []gpu.Buffer{l.dev, l.host} {
				if b != nil {
					_ = b.Free()
				}
			}
		}
	}()
	for i := range ls {
		l := &ls[i]
		if l.q, err = dev.NewQueue(); err != nil {
			return r, false, fmt.Errorf("staging floor: %w", err)
		}
		if l.dev, err = dev.Alloc(size, gpu.DeviceMem); err != nil {
			return r, false, fmt.Errorf("staging floor: %w", err)
		}
		if l.host, err = dev.Alloc(size, gpu.HostMem); err != nil {
			return r, false, fmt.Errorf("staging floor: %w", err)
		}
	}
	best := time.Duration(1<<63 - 1)
	for range 5 {
		done := make(chan error, lanes)
		t0 := time.Now()
		for _, l := range ls {
			cmds := []gpu.Command{gpu.Copy{Dst: l.host, Src: l.dev, Bytes: size}, gpu.Copy{Dst: l.dev, Src: l.host, Bytes: size}}
			if err := l.q.Submit(cmds, func(err error) { done <- err }); err != nil {
				return r, false, fmt.Errorf("staging floor: %w", err)
			}
		}
		for range lanes {
			select {
			case err := <-done:
				if err != nil {
					return r, false, fmt.Errorf("staging floor: %w", err)
				}
			case <-time.After(time.Minute):
				return r, false, errors.New("staging floor: copies not done within a minute")
			}
		}
		best = min(best, time.Since(t0))
	}
	algbw := float64(size) / best.Seconds() / 1e9
	return stagingResult{t: best, busbw: algbw * 2 * float64(ranks-1) / float64(ranks)}, true, nil
}

// measureDeviceCopy is the device's copy rate C (bytes read plus written
// per second): the best of 5 batches of 8 device-to-device copies of size
// bytes (bestBatch).
func measureDeviceCopy(dev gpu.Device, size int) (c float64, err error) {
	q, err := dev.NewQueue()
	if err != nil {
		return 0, fmt.Errorf("device copy: %w", err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = errors.Join(err, q.Close(ctx))
		cancel()
	}()
	var bufs [2]gpu.Buffer
	for i := range bufs {
		if bufs[i], err = dev.Alloc(size, gpu.DeviceMem); err != nil {
			return 0, fmt.Errorf("device copy: %w", err)
		}
		defer bufs[i].Free()
	}
	const reps = 8
	cmds := make([]gpu.Command, reps)
	for i := range cmds {
		cmds[i] = gpu.Copy{Dst: bufs[i%2], Src: bufs[1-i%2], Bytes: size}
	}
	best, err := bestBatch(dev, q, cmds, 5)
	if err != nil {
		return 0, fmt.Errorf("device copy: %w", err)
	}
	return 2 * float64(size) * reps / best.Seconds(), nil
}
