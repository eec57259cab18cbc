//go:build darwin

// Package good uses darwinkit the way gpu/metal does, trap-free: own cgo
// for the device, objc.Call for the trap methods, re-wrapping for parent
// protocol methods.
package good

/*
#cgo LDFLAGS: -framework Metal -framework CoreGraphics
void *MTLCreateSystemDefaultDevice(void);
*/
import "C"

import (
	"unsafe"

	"github.com/progrium/darwinkit/macos/foundation"
	"github.com/progrium/darwinkit/macos/metal"
	"github.com/progrium/darwinkit/objc"
)

func device() metal.DeviceObject {
	return metal.DeviceObject{Object: objc.ObjectFrom(unsafe.Pointer(C.MTLCreateSystemDefaultDevice()))}
}

func run(dev metal.DeviceObject, src string) string {
	var e foundation.Error
	lib := dev.NewLibraryWithSourceOptionsError(src, metal.NewCompileOptions(), unsafe.Pointer(&e))
	if lib.IsNil() {
		return e.LocalizedDescription()
	}
	defer lib.Release()
	fn := lib.NewFunctionWithName("k")
	defer fn.Release()
	pso := objc.Call[metal.ComputePipelineStateObject](dev, objc.Sel("newComputePipelineStateWithFunction:error:"), fn, unsafe.Pointer(&e))
	defer pso.Release()
	buf := dev.NewBufferWithLengthOptions(64, metal.ResourceStorageModeShared)
	defer buf.Release()
	q := dev.NewCommandQueue()
	defer q.Release()
	ev := dev.NewSharedEvent()
	defer ev.Release()
	objc.WithAutoreleasePool(func() {
		cb := q.CommandBuffer()
		enc := cb.ComputeCommandEncoder()
		objc.Call[objc.Void](enc, objc.Sel("setComputePipelineState:"), pso)
		objc.Call[objc.Void](enc, objc.Sel("setBuffer:offset:atIndex:"), buf, uint(0), uint(0))
		n := uint32(16)
		enc.SetBytesLengthAtIndex(unsafe.Pointer(&n), 4, 1)
		enc.DispatchThreadsThreadsPerThreadgroup(metal.Size{Width: 16, Height: 1, Depth: 1}, metal.Size{Width: 16, Height: 1, Depth: 1})
		metal.CommandEncoderObject{Object: enc.Object}.EndEncoding()
		objc.Call[objc.Void](cb, objc.Sel("encodeSignalEvent:value:"), ev, uint64(1))
		cb.AddCompletedHandler(func(metal.CommandBufferObject) {})
		cb.Commit()
	})
	return ""
}
