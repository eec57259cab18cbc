package collectives

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/choreo-gpu/choreo/actors"
	"github.com/choreo-gpu/choreo/gpu"
	_ "github.com/choreo-gpu/choreo/gpu/sim"
)

// A joined group agrees on one device only when every rank named the same
// device the device path serves: the same sim-staged device on every rank
// (its IPC identity), not two of them, not one rank without, not a device
// whose memory the CPU sees; every rank reaches the same verdict.
func TestAgreeOnDevice(t *testing.T) {
	open := func(name string) gpu.Device {
		d, err := gpu.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Close() })
		return d
	}
	a, b, visible := open("sim-staged"), open("sim-staged"), open("sim")
	rt, err := actors.NewRuntime()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	for _, c := range []struct {
		name string
		devs []gpu.Device
		one  bool
	}{
		{"same", []gpu.Device{a, a, a}, true},
		{"two devices", []gpu.Device{a, b, a}, false},
		{"one unnamed", []gpu.Device{a, nil, a}, false},
		{"visible", []gpu.Device{visible, visible, visible}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			gs, err := Local(rt, len(c.devs))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var wg sync.WaitGroup
			errs := make([]error, len(gs))
			for r, g := range gs {
				g.cfg.dev = c.devs[r]
				wg.Add(1)
				go func() { defer wg.Done(); errs[r] = g.agreeOnDevice(ctx) }()
			}
			wg.Wait()
			for r, g := range gs {
				if errs[r] != nil {
					t.Fatalf("rank %d: %v", r, errs[r])
				}
				if g.oneDevice != c.one {
					t.Errorf("rank %d: one device %v, want %v", r, g.oneDevice, c.one)
				}
				_ = g.Close()
			}
		})
	}
}
