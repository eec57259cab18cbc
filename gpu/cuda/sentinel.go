package cuda

import "errors"

// ErrUnavailable says that this machine has no usable CUDA driver or
// device: libcuda.so.1 did not open, lacks an entry point, cuInit failed,
// or the device ordinal does not exist. Errors wrapping it also wrap
// gpu.ErrNoBackend, so gpu.Open("auto") moves on to the next backend.
var ErrUnavailable = errors.New("no usable CUDA driver or device")

// ErrNoKernels says that the embedded PTX (kernels/ops.ptx) is missing,
// empty or lacks a kernel: the package was built before the PTX was
// generated with kernels/gen.sh. Errors wrapping it also wrap
// gpu.ErrNoBackend.
var ErrNoKernels = errors.New("CUDA kernels (kernels/ops.ptx) missing: run gpu/cuda/kernels/gen.sh with nvcc")
