package metal

import "github.com/choreo-gpu/choreo/gpu"

// copyElemSize is the widest element size (8, 4, 2 or 1 bytes) that
// divides a Copy's offsets and length, so the copy kernel moves as few,
// as wide, elements as it can.
func copyElemSize(c gpu.Copy) int {
	for _, size := range []int{8, 4, 2} {
		if c.SrcOff%size == 0 && c.DstOff%size == 0 && c.Bytes%size == 0 {
			return size
		}
	}
	return 1
}

// copyDType is the dtype whose copy kernel moves elements of size bytes.
func copyDType(size int) gpu.DType {
	switch size {
	case 8:
		return gpu.Int64
	case 4:
		return gpu.Int32
	case 2:
		return gpu.Int16
	}
	return gpu.Uint8
}
