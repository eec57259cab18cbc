package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
	"go.uber.org/zap"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/collectives"
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/streams"
)

// world is n in-process ranks on one runtime and device: a group and a GPU
// stream per rank.
type world struct {
	rt     *actors.Runtime
	dev    gpu.Device
	groups []*collectives.Group
	s      []*streams.GPU
}

func newWorld(log *zap.Logger, backend string, n int, timeout time.Duration) (*world, error) {
	if n < 1 {
		return nil, fmt.Errorf("ranks must be >= 1, got %d", n)
	}
	dev, err := gpu.Open(backend)
	if err != nil {
		return nil, err
	}
	rt, err := actors.NewRuntime(actors.WithLogger(log), actors.WithSignalHandler())
	if err != nil {
		_ = dev.Close()
		return nil, err
	}
	w := &world{rt: rt, dev: dev}
	if w.groups, err = collectives.Local(rt, n, collectives.WithTimeout(timeout)); err != nil {
		w.close()
		return nil, err
	}
	for range n {
		s, err := streams.NewGPU(rt, dev)
		if err != nil {
			w.close()
			return nil, err
		}
		w.s = append(w.s, s)
	}
	return w, nil
}

func (w *world) close() {
	_ = w.rt.Close()
	_ = w.dev.Close()
}

// describe is a one-line account of the device.
func (w *world) describe() string {
	p := w.dev.Properties()
	s := fmt.Sprintf("%s (%s)", p.Name, p.Backend)
	if p.ComputeCapability != "" {
		s += ", compute " + p.ComputeCapability
	}
	if p.MemoryBytes > 0 {
		s += ", " + humanize.IBytes(p.MemoryBytes)
	}
	return s
}

// sizeFlag is a byte size given as "4MiB", "64k", "1048576".
type sizeFlag uint64

// UnmarshalText implements encoding.TextUnmarshaler for kong.
func (s *sizeFlag) UnmarshalText(b []byte) error {
	v, err := humanize.ParseBytes(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("size %q: %w", b, err)
	}
	*s = sizeFlag(v)
	return nil
}
