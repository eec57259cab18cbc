package metalshader

import "github.com/choreo-gpu/choreo/gpu"

// Fence kernels (library "fence"). Each runs as one thread except
// InputCoherent, which takes one thread per 32-bit word.
const (
	// FenceUpdate: word = max(word, Params.N), then a system-scope fence.
	FenceUpdate = "fence_update"
	// FenceWait: poll until word >= Params.N, at most Params.A polls; on
	// giving up it stores StatusWaitTimeout into the status word.
	FenceWait = "fence_wait"
	// InputCoherent: make the first Params.N words of a buffer, written
	// earlier by the GPU, visible to the CPU.
	InputCoherent = "input_coherent"
)

// StreamOrder (library "ops") is a one-thread kernel that does nothing but
// bind the status buffer, to order command buffers after an event wait.
const StreamOrder = "stream_order"

// Op is an element-wise operation with one kernel per dtype.
type Op string

// The ops of library "ops". Kernel names are "<op>_<dtype>", e.g.
// "add_float16".
const (
	Fill   Op = "fill"
	Arange Op = "arange"
	Copy   Op = "copy"
	Add    Op = "add"
	Scale  Op = "scale"
)

// Ops lists every Op.
var Ops = []Op{Fill, Arange, Copy, Add, Scale}

// HasKernel reports whether op has a Metal kernel for dt. Fill and Copy
// move raw bits and exist for every dtype; Arange, Add and Scale do not
// exist for Float64, which Metal cannot compute with.
func HasKernel(op Op, dt gpu.DType) bool {
	if !dt.Valid() {
		return false
	}
	switch op {
	case Fill, Copy:
		return true
	case Arange, Add, Scale:
		return dt != gpu.Float64
	}
	return false
}

// OpKernel returns the kernel name for op on dt, and false if there is none
// (see HasKernel).
func OpKernel(op Op, dt gpu.DType) (string, bool) {
	if !HasKernel(op, dt) {
		return "", false
	}
	return string(op) + "_" + dt.String(), true
}

// opsKernels lists the kernels of library "ops".
func opsKernels() []string {
	var names []string
	for _, op := range Ops {
		for _, dt := range gpu.DTypes {
			if name, ok := OpKernel(op, dt); ok {
				names = append(names, name)
			}
		}
	}
	return append(names, StreamOrder)
}
