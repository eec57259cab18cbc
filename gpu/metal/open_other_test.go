//go:build !darwin

package metal

import (
	"errors"
	"strings"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/sim"
)

// Off macOS the driver is registered, its Open fails with a clear error
// wrapping gpu.ErrNoBackend, and "auto" skips it.
func TestOpenOffMacOSIsNoBackend(t *testing.T) {
	found := false
	for _, n := range gpu.Backends() {
		found = found || n == Name
	}
	if !found {
		t.Fatalf("backend %q not registered: %v", Name, gpu.Backends())
	}
	for _, open := range []func() (gpu.Device, error){
		func() (gpu.Device, error) { return gpu.Open(Name) },
		func() (gpu.Device, error) { return Open(WithFenceMode(FenceShared)) },
	} {
		dev, err := open()
		if dev != nil || !errors.Is(err, gpu.ErrNoBackend) {
			t.Fatalf("open metal off macOS: dev %v, err %v; want ErrNoBackend", dev, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "metal: open:") || !strings.Contains(msg, "macOS") {
			t.Errorf("error %q does not say that metal needs macOS", msg)
		}
	}
	dev, err := gpu.Open("auto")
	if err != nil {
		t.Fatalf("auto with metal registered: %v", err)
	}
	defer dev.Close()
	if got := dev.Properties().Backend; got != sim.Name {
		t.Errorf("auto picked %q, want %q", got, sim.Name)
	}
}
