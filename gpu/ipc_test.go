package gpu

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestDecodeIPCHandle: Encode and DecodeIPCHandle round-trip a handle;
// any other length, and an offset or length past 1<<62, is ErrBadArgument.
func TestDecodeIPCHandle(t *testing.T) {
	var h IPCHandle
	for i := range h.Mem {
		h.Mem[i] = byte(i*7 + 1)
	}
	h.Offset, h.Len = 4177920, 12345
	b := h.Encode()
	if len(b) != IPCHandleSize {
		t.Fatalf("Encode: %d bytes, want %d", len(b), IPCHandleSize)
	}
	got, err := DecodeIPCHandle(b)
	if err != nil || got != h {
		t.Fatalf("DecodeIPCHandle(Encode(%v)) = %v, %v", h, got, err)
	}
	if got, err := DecodeIPCHandle(IPCHandle{}.Encode()); err != nil || got != (IPCHandle{}) {
		t.Errorf("the zero handle: %v, %v", got, err)
	}
	for _, n := range []int{0, 1, IPCHandleSize - 1, IPCHandleSize + 1, 2 * IPCHandleSize} {
		if _, err := DecodeIPCHandle(make([]byte, n)); !errors.Is(err, ErrBadArgument) {
			t.Errorf("DecodeIPCHandle of %d bytes: %v, want ErrBadArgument", n, err)
		}
	}
	if _, err := DecodeIPCHandle(nil); !errors.Is(err, ErrBadArgument) {
		t.Errorf("DecodeIPCHandle(nil): %v, want ErrBadArgument", err)
	}
	for _, at := range []int{64, 72} { // the offset, the length
		bad := h.Encode()
		binary.LittleEndian.PutUint64(bad[at:], 1<<62+1)
		if _, err := DecodeIPCHandle(bad); !errors.Is(err, ErrBadArgument) {
			t.Errorf("DecodeIPCHandle with %d at byte %d: %v, want ErrBadArgument", uint64(1<<62+1), at, err)
		}
	}
}
