//go:build linux

package cuda

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"runtime"
	"unsafe"

	"github.com/choreo-gpu/choreo/gpu"
)

//go:generate sh kernels/gen.sh

// kernelFS holds kernels/: ops.cu (the source) and ops.ptx, generated from
// it by kernels/gen.sh with nvcc. The PTX is JIT-compiled by the driver
// (cuModuleLoadData) for whatever GPU it finds.
//
//go:embed kernels
var kernelFS embed.FS

const ptxPath = "kernels/ops.ptx"

// PTXEnv names an environment variable that, when set, makes Open load
// the PTX from that file instead of the embedded kernels/ops.ptx: for
// trying freshly generated kernels with a test binary built before them.
const PTXEnv = "CHOREO_CUDA_PTX"

// embeddedPTX returns the PTX (from PTXEnv's file if set, else embedded),
// NUL-terminated as cuModuleLoadData wants.
func embeddedPTX() ([]byte, error) {
	if path := os.Getenv(PTXEnv); path != "" {
		b, err := os.ReadFile(path)
		if err != nil || len(b) == 0 {
			return nil, fmt.Errorf("cuda: %s=%s: %v: %w (%w)", PTXEnv, path, err, ErrNoKernels, gpu.ErrNoBackend)
		}
		return append(b[:len(b):len(b)], 0), nil
	}
	b, err := kernelFS.ReadFile(ptxPath)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(b) == 0) {
		return nil, fmt.Errorf("cuda: %s is missing or empty in this build: %w (%w)", ptxPath, ErrNoKernels, gpu.ErrNoBackend)
	}
	if err != nil {
		return nil, fmt.Errorf("cuda: read %s: %w", ptxPath, err)
	}
	return append(b[:len(b):len(b)], 0), nil
}

// dtypeSuffix names the kernels' per-dtype variants (see ops.cu).
var dtypeSuffix = map[gpu.DType]string{
	gpu.Float32: "f32", gpu.Float64: "f64", gpu.Float16: "f16", gpu.BFloat16: "bf16",
	gpu.Int8: "i8", gpu.Int16: "i16", gpu.Int32: "i32", gpu.Int64: "i64", gpu.Uint8: "u8",
}

// kernelOps are the elementwise kernels, each with one variant per dtype.
var kernelOps = []string{"fill", "arange", "add", "scale"}

// storeMaxKernel is the monotonic WriteValue kernel.
const storeMaxKernel = "choreo_store_max_u32"

// kernels is the loaded module and its functions, looked up once at Open
// so that a PTX lacking a kernel fails there and not in the middle of a
// batch. Launches are safe wherever the context is current (a driver
// thread, onContext).
type kernels struct {
	module   cuModule
	fn       map[string]cuFunc // "fill_f32" ... and storeMaxKernel
	storeMax cuFunc
	// peer holds the PeerReduce kernels ("peer_sum_f32" ...), nil when the
	// PTX predates them (the device then has no peer tables).
	peer map[string]cuFunc
}

// peerOps are PeerReduce's kernels' op names, with a variant per dtype.
var peerOps = []gpu.ReduceOp{gpu.OpSum, gpu.OpProd, gpu.OpMin, gpu.OpMax}

// loadKernels loads ptx; it runs on a driver thread.
func loadKernels(a *api, ptx []byte) (*kernels, error) {
	k := &kernels{fn: map[string]cuFunc{}}
	r := a.cuModuleLoadData(&k.module, unsafe.Pointer(&ptx[0]))
	runtime.KeepAlive(ptx)
	if err := a.errorf("cuModuleLoadData", r); err != nil {
		return nil, fmt.Errorf("cuda: load %s: %w", ptxPath, err)
	}
	names := []string{storeMaxKernel}
	for _, op := range kernelOps {
		for _, dt := range gpu.DTypes {
			names = append(names, op+"_"+dtypeSuffix[dt])
		}
	}
	for _, n := range names {
		sym := n
		if n != storeMaxKernel {
			sym = "choreo_" + n
		}
		var f cuFunc
		if err := a.errorf("cuModuleGetFunction", a.cuModuleGetFunction(&f, k.module, sym)); err != nil {
			a.cuModuleUnload(k.module)
			return nil, fmt.Errorf("cuda: kernel %s in %s: %w (%w; %w)", sym, ptxPath, err, ErrNoKernels, gpu.ErrNoBackend)
		}
		k.fn[n] = f
	}
	k.storeMax = k.fn[storeMaxKernel]
	k.peer = map[string]cuFunc{}
	for _, op := range peerOps {
		for _, dt := range gpu.DTypes {
			n := "peer_" + op.String() + "_" + dtypeSuffix[dt]
			var f cuFunc
			if a.cuModuleGetFunction(&f, k.module, "choreo_"+n) != cudaSuccess {
				k.peer = nil // an older PTX: no device-resident path
				return k, nil
			}
			k.peer[n] = f
		}
	}
	return k, nil
}

// Launch geometry of the elementwise kernels: grid-stride loops over
// int64 indices, so any n fits in at most maxBlocks blocks.
const (
	blockThreads = 256
	maxBlocks    = 1 << 16
)

// kernelArgs builds cuLaunchKernel's kernelParams: one heap cell per
// argument (kernels take only 8-byte pointers, int64, double and 4-byte
// unsigned/int values) and the array of pointers to them. Both must stay
// alive across the call; launch keeps them so.
type kernelArgs struct {
	cells []uint64
	ptrs  []unsafe.Pointer
}

func (k *kernelArgs) u64(v uint64) {
	k.cells = append(k.cells, v)
}
func (k *kernelArgs) ptr(p uintptr) { k.u64(uint64(p)) }
func (k *kernelArgs) i64(v int64)   { k.u64(uint64(v)) }
func (k *kernelArgs) f64(v float64) { k.u64(math.Float64bits(v)) }
func (k *kernelArgs) u32(v uint32)  { k.u64(uint64(v)) } // little-endian: the low 4 bytes are the value
func (k *kernelArgs) i32(v int32)   { k.u64(uint64(uint32(v))) }
func (k *kernelArgs) boolean(v bool) {
	if v {
		k.i32(1)
	} else {
		k.i32(0)
	}
}
func (k *kernelArgs) reset(cap_ int) { k.cells = make([]uint64, 0, cap_); k.ptrs = nil }
func (k *kernelArgs) params() unsafe.Pointer {
	// cells never grows after this point, so its elements stay put.
	k.ptrs = make([]unsafe.Pointer, len(k.cells))
	for i := range k.cells {
		k.ptrs[i] = unsafe.Pointer(&k.cells[i])
	}
	return unsafe.Pointer(&k.ptrs[0])
}

// launch runs f over n elements on stream s.
func (a *api) launch(f cuFunc, name string, n int, threads uint32, s cuStream, args *kernelArgs) error {
	blocks := uint32(1)
	if n > 0 {
		blocks = uint32(min((n+int(threads)-1)/int(threads), maxBlocks))
	}
	p := args.params()
	r := a.cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, 0, s, p, nil)
	runtime.KeepAlive(args)
	return a.errorf("cuLaunchKernel("+name+")", r)
}

// The launchers below put one op on stream s. Each takes device addresses.

func (k *kernels) fill(a *api, s cuStream, dst uintptr, dt gpu.DType, n int, v gpu.Scalar) error {
	var args kernelArgs
	args.reset(3)
	args.ptr(dst)
	args.i64(int64(n))
	args.u64(v.Bits(dt))
	name := "fill_" + dtypeSuffix[dt]
	return a.launch(k.fn[name], name, n, blockThreads, s, &args)
}

func (k *kernels) arange(a *api, s cuStream, dst uintptr, dt gpu.DType, n int, start, step gpu.Scalar) error {
	var args kernelArgs
	args.reset(7)
	args.ptr(dst)
	args.i64(int64(n))
	args.f64(start.Float64())
	args.f64(step.Float64())
	args.i64(start.I)
	args.i64(step.I)
	args.boolean(start.IsInt && step.IsInt)
	name := "arange_" + dtypeSuffix[dt]
	return a.launch(k.fn[name], name, n, blockThreads, s, &args)
}

func (k *kernels) add(a *api, s cuStream, dst, x, y uintptr, dt gpu.DType, n int) error {
	var args kernelArgs
	args.reset(4)
	args.ptr(dst)
	args.ptr(x)
	args.ptr(y)
	args.i64(int64(n))
	name := "add_" + dtypeSuffix[dt]
	return a.launch(k.fn[name], name, n, blockThreads, s, &args)
}

func (k *kernels) scale(a *api, s cuStream, dst, src uintptr, dt gpu.DType, n int, f gpu.Scalar) error {
	var args kernelArgs
	args.reset(5)
	args.ptr(dst)
	args.ptr(src)
	args.i64(int64(n))
	args.f64(f.Float64())
	args.i64(f.I)
	args.boolean(f.IsInt)
	name := "scale_" + dtypeSuffix[dt]
	return a.launch(k.fn[name], name, n, blockThreads, s, &args)
}

// storeMaxWord launches the one-thread monotonic store: word = max(word, v)
// after a system-scope fence.
func (k *kernels) storeMaxWord(a *api, s cuStream, addr uintptr, v uint32) error {
	var args kernelArgs
	args.reset(2)
	args.ptr(addr)
	args.u32(v)
	return a.launch(k.storeMax, storeMaxKernel, 1, 1, s, &args)
}
