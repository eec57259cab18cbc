//go:build linux

package cuda

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Driver API handle types. Every CUDA handle is an opaque pointer and a
// CUdeviceptr is a 64-bit integer, so all of them travel as uintptr; a
// CUdevice is an int.
type (
	cuResult  int32
	cuDevice  int32
	cuContext uintptr
	cuStream  uintptr
	cuModule  uintptr
	cuFunc    uintptr
	cuEvent   uintptr
)

// Constants from cuda.h (checked against the CUDA 12/13 headers).
const (
	cudaSuccess       cuResult = 0
	cudaOutOfMemory   cuResult = 2
	cudaNotReady      cuResult = 600
	cudaErrorNoDevice cuResult = 100

	attrCanMapHostMemory  = 19 // CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY
	attrUnifiedAddressing = 41 // CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING
	attrComputeCapMajor   = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrComputeCapMinor   = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

	streamNonBlocking = 0x1 // CU_STREAM_NON_BLOCKING

	memHostAllocPortable  = 0x01 // CU_MEMHOSTALLOC_PORTABLE
	memHostAllocDeviceMap = 0x02 // CU_MEMHOSTALLOC_DEVICEMAP

	streamWaitValueGEQ       = 0x0 // CU_STREAM_WAIT_VALUE_GEQ: (int32)(*addr - value) >= 0
	streamWriteValueDefault  = 0x0 // CU_STREAM_WRITE_VALUE_DEFAULT: fenced like __threadfence_system
	eventDefault             = 0x0 // CU_EVENT_DEFAULT
	eventDisableTiming       = 0x2 // CU_EVENT_DISABLE_TIMING
	libcudaName              = "libcuda.so.1"
	libcudaFallbackName      = "libcuda.so"
	deviceNameBufferCapacity = 256
)

// api is the table of driver entry points, resolved once per process with
// dlopen/dlsym through purego (no cgo). It holds no device state, so any
// number of Devices share it. Each field is named after the C function it
// calls; the exported symbol (versioned where the header maps the name to
// a _v2 entry point) is given in the symbol table below.
type api struct {
	// allocs counts cuMemAlloc and cuMemHostAlloc calls (Device.DriverAllocs).
	allocs atomic.Uint64
	lib    uintptr

	cuInit                    func(flags uint32) cuResult
	cuDriverGetVersion        func(v *int32) cuResult
	cuGetErrorName            func(r cuResult, s **byte) cuResult
	cuGetErrorString          func(r cuResult, s **byte) cuResult
	cuDeviceGetCount          func(n *int32) cuResult
	cuDeviceGet               func(dev *cuDevice, ordinal int32) cuResult
	cuDeviceGetName           func(name *byte, n int32, dev cuDevice) cuResult
	cuDeviceTotalMem          func(bytes *uint64, dev cuDevice) cuResult
	cuDeviceGetAttribute      func(v *int32, attr int32, dev cuDevice) cuResult
	cuDevicePrimaryCtxRetain  func(ctx *cuContext, dev cuDevice) cuResult
	cuDevicePrimaryCtxRelease func(dev cuDevice) cuResult
	cuCtxSetCurrent           func(ctx cuContext) cuResult
	cuCtxGetCurrent           func(ctx *cuContext) cuResult
	cuStreamCreate            func(s *cuStream, flags uint32) cuResult
	cuStreamDestroy           func(s cuStream) cuResult
	cuStreamQuery             func(s cuStream) cuResult
	cuStreamSynchronize       func(s cuStream) cuResult
	cuMemAlloc                func(p *uintptr, n uint64) cuResult
	cuMemFree                 func(p uintptr) cuResult
	cuMemHostAlloc            func(p *unsafe.Pointer, n uint64, flags uint32) cuResult
	cuMemFreeHost             func(p unsafe.Pointer) cuResult
	cuMemHostGetDevicePointer func(d *uintptr, p unsafe.Pointer, flags uint32) cuResult
	cuMemcpyAsync             func(dst, src uintptr, n uint64, s cuStream) cuResult
	cuStreamWaitValue32       func(s cuStream, addr uintptr, v uint32, flags uint32) cuResult
	cuStreamWriteValue32      func(s cuStream, addr uintptr, v uint32, flags uint32) cuResult
	cuModuleLoadData          func(m *cuModule, image unsafe.Pointer) cuResult
	cuModuleUnload            func(m cuModule) cuResult
	cuModuleGetFunction       func(f *cuFunc, m cuModule, name string) cuResult
	cuLaunchKernel            func(f cuFunc, gx, gy, gz, bx, by, bz, shmem uint32, s cuStream, params, extra unsafe.Pointer) cuResult
	cuEventCreate             func(e *cuEvent, flags uint32) cuResult
	cuEventRecord             func(e cuEvent, s cuStream) cuResult
	cuEventSynchronize        func(e cuEvent) cuResult
	cuEventElapsedTime        func(ms *float32, start, end cuEvent) cuResult
	cuEventDestroy            func(e cuEvent) cuResult
	cuDeviceGetUuid           func(uuid *[16]byte, dev cuDevice) cuResult
	cuMemGetAddressRange      func(base *uintptr, size *uint64, p uintptr) cuResult
	cuIpcGetMemHandle         func(h *ipcMemHandle, p uintptr) cuResult
	cuIpcOpenMemHandle        func(p *uintptr, h ipcMemHandle, flags uint32) cuResult
	cuIpcCloseMemHandle       func(p uintptr) cuResult
}

// symbols lists every entry point with the exported name it binds to.
func (a *api) symbols() []struct {
	fn   any
	name string
} {
	return []struct {
		fn   any
		name string
	}{
		{&a.cuInit, "cuInit"},
		{&a.cuDriverGetVersion, "cuDriverGetVersion"},
		{&a.cuGetErrorName, "cuGetErrorName"},
		{&a.cuGetErrorString, "cuGetErrorString"},
		{&a.cuDeviceGetCount, "cuDeviceGetCount"},
		{&a.cuDeviceGet, "cuDeviceGet"},
		{&a.cuDeviceGetName, "cuDeviceGetName"},
		{&a.cuDeviceTotalMem, "cuDeviceTotalMem_v2"},
		{&a.cuDeviceGetAttribute, "cuDeviceGetAttribute"},
		{&a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"},
		{&a.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"},
		{&a.cuCtxSetCurrent, "cuCtxSetCurrent"},
		{&a.cuCtxGetCurrent, "cuCtxGetCurrent"},
		{&a.cuStreamCreate, "cuStreamCreate"},
		{&a.cuStreamDestroy, "cuStreamDestroy_v2"},
		{&a.cuStreamQuery, "cuStreamQuery"},
		{&a.cuStreamSynchronize, "cuStreamSynchronize"},
		{&a.cuMemAlloc, "cuMemAlloc_v2"},
		{&a.cuMemFree, "cuMemFree_v2"},
		{&a.cuMemHostAlloc, "cuMemHostAlloc"},
		{&a.cuMemFreeHost, "cuMemFreeHost"},
		{&a.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"},
		{&a.cuMemcpyAsync, "cuMemcpyAsync"},
		{&a.cuStreamWaitValue32, "cuStreamWaitValue32_v2"},
		{&a.cuStreamWriteValue32, "cuStreamWriteValue32_v2"},
		{&a.cuModuleLoadData, "cuModuleLoadData"},
		{&a.cuModuleUnload, "cuModuleUnload"},
		{&a.cuModuleGetFunction, "cuModuleGetFunction"},
		{&a.cuLaunchKernel, "cuLaunchKernel"},
		{&a.cuEventCreate, "cuEventCreate"},
		{&a.cuEventRecord, "cuEventRecord"},
		{&a.cuEventSynchronize, "cuEventSynchronize"},
		{&a.cuEventElapsedTime, "cuEventElapsedTime"},
		{&a.cuEventDestroy, "cuEventDestroy_v2"},
		{&a.cuDeviceGetUuid, "cuDeviceGetUuid_v2"},
		{&a.cuMemGetAddressRange, "cuMemGetAddressRange_v2"},
		{&a.cuIpcGetMemHandle, "cuIpcGetMemHandle"},
		{&a.cuIpcOpenMemHandle, "cuIpcOpenMemHandle_v2"},
		{&a.cuIpcCloseMemHandle, "cuIpcCloseMemHandle"},
	}
}

var loaded struct {
	once sync.Once
	api  *api
	err  error
}

// loadAPI opens libcuda.so.1 and resolves the table, once per process.
// The error wraps ErrUnavailable and gpu.ErrNoBackend.
func loadAPI() (*api, error) {
	loaded.once.Do(func() { loaded.api, loaded.err = openAPI() })
	return loaded.api, loaded.err
}

// maxConnections is how many hardware work queues the driver is asked for
// (CUDA_DEVICE_MAX_CONNECTIONS, default 8, at most 32). Streams beyond that
// share queues, and a stream blocked on a fence wait then holds back the
// streams that share its queue: with one stream per rank, a rank's wait
// could hold back the very peer it waits for. A value the user set wins.
const maxConnections = "32"

func openAPI() (*api, error) {
	if os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS") == "" {
		_ = os.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", maxConnections) // read by cuInit
	}
	lib, err := purego.Dlopen(libcudaName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		lib2, err2 := purego.Dlopen(libcudaFallbackName, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err2 != nil {
			return nil, unavailablef("cuda: dlopen %s: %v", libcudaName, err)
		}
		lib = lib2
	}
	a := &api{lib: lib}
	for _, s := range a.symbols() {
		sym, err := purego.Dlsym(lib, s.name)
		if err != nil {
			return nil, unavailablef("cuda: dlsym %s in %s (driver too old?): %v", s.name, libcudaName, err)
		}
		purego.RegisterFunc(s.fn, sym)
	}
	a.countAllocs()
	if r := a.cuInit(0); r != cudaSuccess {
		return nil, unavailablef("cuda: %v", a.errorf("cuInit", r))
	}
	return a, nil
}

// countAllocs wraps the driver's allocations so that each call counts.
func (a *api) countAllocs() {
	dev, host := a.cuMemAlloc, a.cuMemHostAlloc
	a.cuMemAlloc = func(p *uintptr, n uint64) cuResult { a.allocs.Add(1); return dev(p, n) }
	a.cuMemHostAlloc = func(p *unsafe.Pointer, n uint64, flags uint32) cuResult {
		a.allocs.Add(1)
		return host(p, n, flags)
	}
}

// cstring copies a NUL-terminated C string owned by the driver.
func cstring(p *byte) string {
	if p == nil {
		return ""
	}
	var n int
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// errorf turns a failed CUresult into an *Error naming the call; it
// returns nil for CUDA_SUCCESS.
func (a *api) errorf(call string, r cuResult) error {
	if r == cudaSuccess {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Name: fmt.Sprintf("CUresult(%d)", int(r))}
	var s *byte
	if a.cuGetErrorName(r, &s) == cudaSuccess {
		e.Name = cstring(s)
	}
	s = nil
	if a.cuGetErrorString(r, &s) == cudaSuccess {
		e.Desc = cstring(s)
	}
	return e
}
