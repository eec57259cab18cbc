// Package metalshader holds choreo's Metal Shading Language sources,
// embedded in the binary and compiled at run time by the Metal backend
// (gpu/metal) with newLibraryWithSource.
//
// There are two libraries:
//
//   - "fence" (fence.metal, MSL 3.2, macOS 15): fence_update, fence_wait and
//     input_coherent, the kernels of the fast shared-word fence mode.
//   - "ops" (ops.metal): fill, arange, copy, add and scale for every dtype
//     Metal can store, and stream_order.
//
// The package is plain Go and builds everywhere; only a Mac can compile the
// sources (there is no MSL compiler for Linux). Every kernel shares one
// binding layout (BindDst ... BindStatus) and one parameter block (Params).
package metalshader
