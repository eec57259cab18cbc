package gputest

import (
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// Run runs the conformance suite as subtests of t. open is called once per
// subtest and must return a fresh device (or fail t); Run closes it when the
// subtest ends.
func Run(t *testing.T, open func(t *testing.T) gpu.Device) {
	cases := []struct {
		name string
		fn   func(t *testing.T, open func(t *testing.T) gpu.Device)
	}{
		{"Properties", testProperties},
		{"Alloc", testAlloc},
		{"CopyRoundTrip", testCopyRoundTrip},
		{"Ordering", testOrdering},
		{"WaitHoldsBack", testWaitHoldsBack},
		{"WriteAfterKernel", testWriteAfterKernel},
		{"WaitAlreadyReached", testWaitAlreadyReached},
		{"CrossQueue", testCrossQueue},
		{"StopValue", testStopValue},
		{"Monotonic", testMonotonic},
		{"FenceWait", testFenceWait},
		{"Reset", testReset},
		{"Kernels", testKernels},
		{"KernelAliasing", testKernelAliasing},
		{"PeerReduce", testPeerReduce},
		{"BadArguments", testBadArguments},
		{"FreedBuffer", testFreedBuffer},
		{"Units", testUnits},
		{"UnitsBadEnds", testUnitsBadEnds},
		{"DonePanics", testDonePanics},
		{"CloseIdle", testCloseIdle},
		{"CloseDrains", testCloseDrains},
		{"CloseWithBlockedWork", testCloseWithBlockedWork},
		{"DeviceClose", testDeviceClose},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open) })
	}
}
