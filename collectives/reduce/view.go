package reduce

import (
	"encoding/binary"
	"unsafe"
)

// number is every Go element type behind a non-half gpu.DType.
type number interface {
	~float32 | ~float64 | ~int8 | ~int16 | ~int32 | ~int64 | ~uint8
}

// hostLittleEndian is true when the host stores numbers little-endian, so
// that raw element bytes can be viewed in place as typed slices.
var hostLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// view returns b as a []T sharing its memory, or false when that is not
// possible (host not little-endian, or b not aligned for T). len(b) must be a
// multiple of T's size.
func view[T number](b []byte) ([]T, bool) {
	var z T
	if len(b) == 0 {
		return nil, true
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if !hostLittleEndian || uintptr(p)%unsafe.Alignof(z) != 0 {
		return nil, false
	}
	return unsafe.Slice((*T)(p), len(b)/int(unsafe.Sizeof(z))), true
}

// bounceElems is how many elements applyBytes decodes per step when it
// cannot view the buffers in place.
const bounceElems = 256

// applyBytes runs f(op, d, s) over the elements of dst and src (raw
// little-endian bytes of T, equal length, a multiple of T's size): in place
// when both can be viewed as []T, otherwise through small decoded copies.
// f must implement d[i] = d[i] op s[i] for equal-length d and s.
func applyBytes[T number](op Op, dst, src []byte, f func(op Op, d, s []T)) {
	d, okd := view[T](dst)
	s, oks := view[T](src)
	if okd && oks {
		f(op, d, s)
		return
	}
	var z T
	size := int(unsafe.Sizeof(z))
	db := make([]T, bounceElems)
	sb := make([]T, bounceElems)
	for off := 0; off < len(dst); off += bounceElems * size {
		end := min(off+bounceElems*size, len(dst))
		n := (end - off) / size
		// Decode cannot fail: the buffers hold exactly n elements.
		_, _ = binary.Decode(dst[off:end], binary.LittleEndian, db[:n])
		_, _ = binary.Decode(src[off:end], binary.LittleEndian, sb[:n])
		f(op, db[:n], sb[:n])
		_, _ = binary.Encode(dst[off:end], binary.LittleEndian, db[:n])
	}
}
