//go:build darwin

// Package bad holds one darwinkit mistake per function; each line with a
// problem says what darwincheck must report there.
package bad

import (
	"github.com/progrium/darwinkit/macos/metal"
	"github.com/progrium/darwinkit/objc"
)

func wrongMethodName(dev metal.DeviceObject) {
	_ = dev.NewBufferWithLength(64, metal.ResourceStorageModeShared) // want type "NewBufferWithLength"
}

func wrongArgumentType(dev metal.DeviceObject, n int) {
	_ = dev.NewBufferWithLengthOptions(n, metal.ResourceStorageModeShared) // want type "cannot use n"
}

func missingParentMethod(enc metal.ComputeCommandEncoderObject) {
	enc.EndEncoding() // want type "EndEncoding"
}

func trapCall(enc metal.ComputeCommandEncoderObject, pso metal.ComputePipelineStateObject) {
	enc.SetComputePipelineState(pso) // want trap "ComputeCommandEncoderObject.SetComputePipelineState panics"
}

func trapMethodValue(cb metal.CommandBufferObject) func(metal.EventObject, uint64) {
	return cb.EncodeSignalEventValue // want trap "EncodeSignalEventValue panics"
}

func selectorTypo(enc metal.ComputeCommandEncoderObject, buf metal.BufferObject) {
	objc.Call[objc.Void](enc, objc.Sel("setBufer:offset:atIndex:"), buf, uint(0), uint(0)) // want sel "setBufer:offset:atIndex:"
}

func selectorNotConstant(enc metal.ComputeCommandEncoderObject, name string) {
	objc.Call[objc.Void](enc, objc.Sel(name)) // want sel "not a constant"
}
