// Package gputest is the conformance suite of choreo's gpu backends. Every
// backend (sim in CI; cuda and metal on their hardware) runs it against
// itself from its own _test.go:
//
//	func TestConformance(t *testing.T) {
//		gputest.Run(t, func(t *testing.T) gpu.Device {
//			dev, err := sim.New()
//			if err != nil {
//				t.Fatal(err)
//			}
//			return dev
//		})
//	}
//
//	func BenchmarkBackend(b *testing.B) { gputest.Bench(b, openForBench) }
//
// The suite goes through the gpu interfaces only, reads device results by
// copying them into HostMem buffers (DeviceMem may not be CPU visible), and
// bounds every wait (Timeout), so a broken backend fails a test instead of
// hanging it. Kernel results are checked against references computed here
// in Go, which spell out the arithmetic rules every backend must follow
// (see reference.go).
package gputest
