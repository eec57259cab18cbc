//go:build linux

package cuda

// DeviceCount is the number of GPUs the CUDA driver sees (cuDeviceGetCount,
// after CUDA_VISIBLE_DEVICES). Errors wrap ErrUnavailable and
// gpu.ErrNoBackend when this machine has no usable driver.
func DeviceCount() (int, error) {
	a, err := loadAPI()
	if err != nil {
		return 0, err
	}
	var n int32
	if err := a.errorf("cuDeviceGetCount", a.cuDeviceGetCount(&n)); err != nil {
		return 0, unavailablef("cuda: %v", err)
	}
	return int(n), nil
}

// Ordinal is the GPU d runs on: its index among the GPUs the driver sees
// (Options.Ordinal; for a device opened through the registry, the one
// Driver chose).
func (d *Device) Ordinal() int { return d.opts.Ordinal }
