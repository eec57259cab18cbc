package algo

import "unsafe"

// sameSlice reports whether a and b are the same memory (same start and
// length).
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// overlaps reports whether a and b share any byte.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	sa, sb := start(a), start(b)
	return sa < sb+uintptr(len(b)) && sb < sa+uintptr(len(a))
}

// start is the address of b's first byte, used only to compare buffers.
func start(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
