// Package gpu is the device layer of choreo: the Device, Queue, Buffer and
// FenceWord interfaces that every backend implements, the commands a queue
// runs, and a registry of backends in the style of database/sql drivers.
//
// A backend registers itself from its package's init function:
//
//	func init() { gpu.Register("sim", driver{}) }
//
// and a program picks one by name (importing the backend for its side
// effect), or asks for "auto", which takes the best available backend and
// falls back to "sim":
//
//	dev, err := gpu.Open("auto")
//
// Optional interfaces extend a device for the collectives' faster paths:
// PeerDevice (peer tables: kernels that read buffers named at run time),
// IPCDevice (buffers other processes on the host can map) and
// EngineDevice (a vendor collective library such as NCCL).
//
// gpu imports nothing of the rest of the runtime: streams, fences and arrays
// are built on top of it.
package gpu
