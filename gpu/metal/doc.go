// Package metal is choreo's Metal backend (macOS, Apple silicon), built on
// darwinkit. Importing it registers the driver "metal":
//
//	import _ "github.com/choreo-gpu/choreo/gpu/metal"
//	dev, err := gpu.Open("metal")
//
// On darwin the device is MTLCreateSystemDefaultDevice; every buffer and
// fence word is a shared-storage MTLBuffer (unified memory: the CPU sees
// all of it, gpu.Properties.HostVisibleDeviceMem is true); kernels are
// compiled at run time from package metalshader and cached; each queue is
// one MTLCommandQueue; each batch is encoded and committed inside an
// autorelease pool.
//
// Fence words come in two modes, chosen by WithFenceMode or the
// CHOREO_METAL_FENCE environment variable for gpu.Open:
//
//   - FenceEvent (default): an MTLSharedEvent. The GPU waits with
//     encodeWaitForEvent:value: and raises with encodeSignalEvent:value:;
//     the CPU reads signaledValue and raises with setSignaledValue.
//   - FenceShared ("fast"): a 4-byte shared-storage buffer. The GPU waits
//     with the bounded fence_wait kernel and raises with input_coherent +
//     fence_update; the CPU uses atomics. Needs MSL 3.2 (macOS 15) and a
//     Metal3 GPU. A fence_wait that gives up after WithWaitPolls polls
//     fails its batch with an error wrapping ErrWaitTimeout (no GPU wait
//     is unbounded, and the failure reaches the batch's outputs), and
//     the rest of the batch does not run: in a SubmitUnits batch, the
//     wait's unit and every later one fail with it.
//
// Float64 arithmetic (arange, add, scale) and integer arange/scale with a
// floating-point Scalar run on the CPU, in order, on the shared memory:
// Metal has no 64-bit float type, and the CPU path keeps the results
// bit-identical to the sim backend's.
//
// On other systems the package builds, registers "metal" too, and its
// Open returns an error wrapping gpu.ErrNoBackend, so gpu.Open("auto")
// skips it. See docs/metal.md for what is checked without a Mac.
package metal
