package metalshader

import "unsafe"

// Buffer binding indices shared by every kernel (the [[buffer(i)]] of the
// MSL sources).
const (
	BindDst    = 0 // destination; the fence word for fence kernels
	BindA      = 1 // source of copy and scale, first operand of add
	BindB      = 2 // second operand of add
	BindParams = 3 // Params, passed with setBytes
	BindStatus = 4 // the batch's status word (uint32)
)

// Status word values. A batch's kernels run while its status word is
// StatusRunning and do nothing once it is anything else.
// The low 8 bits are the code, the rest the index of the command that set
// it (WaitTimeoutStatus, ParseStatus).
const (
	StatusRunning     uint32 = 0
	StatusWaitTimeout uint32 = 1 // fence_wait gave up (written by the GPU)
	StatusStopped     uint32 = 2 // the CPU stopped the batch (queue closing)
)

// WaitTimeoutStatus is the status fence_wait stores (its Params.B) when the
// wait of command cmd of the batch gives up.
func WaitTimeoutStatus(cmd int) uint32 { return StatusWaitTimeout | uint32(cmd)<<8 }

// ParseStatus splits a status word into its code and command index.
func ParseStatus(s uint32) (code uint32, cmd int) { return s & 0xFF, int(s >> 8) }

// Params is the parameter block every kernel reads at BindParams. Its
// layout matches the MSL struct Params { ulong a; ulong b; uint n; uint
// pad; } (24 bytes, 8-byte aligned). Meaning per kernel:
//
//	fill_T            A = the value's bits                 N = count
//	copy_T            A = src offset, B = dst offset (elements), N = count
//	arange_T          A = start, B = step                  N = count
//	add_T             -                                    N = count
//	scale_T           A = factor                           N = count
//	fence_update      -                                    N = value
//	fence_wait        A = max polls, B = timeout status    N = value
//	input_coherent    -                                    N = 32-bit words
//
// For float32, float16 and bfloat16 kernels the float arguments are float32
// bits in the low 32 bits of A and B; for integer kernels A and B are the
// int64 values (used modulo 2^64).
type Params struct {
	A, B uint64
	N    uint32
	_    uint32
}

// ParamsSize is the size of Params in bytes (24).
const ParamsSize = int(unsafe.Sizeof(Params{}))
