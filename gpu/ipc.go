package gpu

import (
	"encoding/binary"
	"fmt"
)

// IPCHandleSize is the size of an encoded IPCHandle.
const IPCHandleSize = 64 + 8 + 8

// IPCHandle names a range of device memory that another process on the
// same host can map: the exporting allocation's handle (the driver's, 64
// bytes), the range's offset in it and its length. It travels as
// IPCHandleSize bytes (Encode, DecodeIPCHandle).
type IPCHandle struct {
	Mem    [64]byte
	Offset uint64
	Len    uint64
}

// Encode returns h as IPCHandleSize bytes.
func (h IPCHandle) Encode() []byte {
	b := make([]byte, IPCHandleSize)
	copy(b, h.Mem[:])
	binary.LittleEndian.PutUint64(b[64:], h.Offset)
	binary.LittleEndian.PutUint64(b[72:], h.Len)
	return b
}

// DecodeIPCHandle decodes what Encode made; any other length is
// ErrBadArgument.
func DecodeIPCHandle(b []byte) (IPCHandle, error) {
	var h IPCHandle
	if len(b) != IPCHandleSize {
		return h, badArg("ipc handle", "%d bytes, want %d", len(b), IPCHandleSize)
	}
	copy(h.Mem[:], b)
	h.Offset = binary.LittleEndian.Uint64(b[64:])
	h.Len = binary.LittleEndian.Uint64(b[72:])
	if h.Len > 1<<62 || h.Offset > 1<<62 {
		return h, badArg("ipc handle", "offset %d, length %d", h.Offset, h.Len)
	}
	return h, nil
}

func (h IPCHandle) String() string {
	return fmt.Sprintf("ipc(%x…+%d, %d bytes)", h.Mem[:8], h.Offset, h.Len)
}

// IPCDevice is implemented by devices whose device memory other processes
// on the same host can map (CUDA IPC), so that the collectives' device
// path reaches ranks in other processes: a rank exports its buffers, its
// peers import them and name the imports in their PeerTables.
//
// ID names the physical device, the same in every process (its UUID):
// only processes that report the same ID may share buffers this way.
// Export names b, a DeviceMem buffer of this device; it fails with
// ErrBadArgument for other memory. Import maps the range h names (exported
// by another process from the device with this ID) and returns a Buffer of
// this device aliasing it, for PeerTable entries; Free ends the alias, not
// the memory. Mappings are cached per exporting allocation and closed at
// Close; the exporter must keep the memory from reuse while an importer's
// commands may touch it (the collectives' choreography does).
type IPCDevice interface {
	PeerDevice
	ID() [16]byte
	Export(b Buffer) (IPCHandle, error)
	Import(h IPCHandle) (Buffer, error)
}
