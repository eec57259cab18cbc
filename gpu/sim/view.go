package sim

import "unsafe"

// view reinterprets the first n elements of a buffer's memory as []T. The
// memory is 64-byte aligned (newBuffer) and validation guaranteed that n
// elements fit.
func view[T any](b []byte, n int) []T {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
