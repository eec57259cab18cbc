package reduce

import "github.com/choreo-gpu/choreo/gpu"

// Into sets dst[i] = dst[i] op src[i] for every element. dst and src hold
// raw little-endian elements of dt, have equal length, a multiple of
// dt.Size(), and are either the same slice or disjoint. float16 and bfloat16
// are computed in float32 and rounded once. Bad input (invalid op or dtype,
// lengths, partial overlap) returns an error wrapping ErrBadOp or
// ErrBadArgument and leaves dst untouched; zero length is a no-op.
func Into(op Op, dt gpu.DType, dst, src []byte) error {
	if err := checkOpType(op, dt); err != nil {
		return err
	}
	if len(dst) != len(src) {
		return badArg(op, dt, "dst has %d bytes, src %d", len(dst), len(src))
	}
	if err := checkMultiple(op, dt, "dst", dst); err != nil {
		return err
	}
	if Overlap(dst, src) == Partial {
		return badArg(op, dt, "dst and src partially overlap")
	}
	intoBytes(op, dt, dst, src)
	return nil
}

// checkMultiple fails unless len(b) is a multiple of dt's size.
func checkMultiple(op Op, dt gpu.DType, name string, b []byte) error {
	if len(b)%dt.Size() != 0 {
		return badArg(op, dt, "%s has %d bytes, not a multiple of the %d-byte element", name, len(b), dt.Size())
	}
	return nil
}

// intoBytes is Into after validation.
func intoBytes(op Op, dt gpu.DType, dst, src []byte) {
	switch dt {
	case gpu.Float32:
		applyBytes(op, dst, src, float32Into)
	case gpu.Float64:
		applyBytes(op, dst, src, float64Into)
	case gpu.Float16, gpu.BFloat16:
		manyHalf(op, dt, dst, [][]byte{dst, src})
	case gpu.Int8:
		applyBytes(op, dst, src, intoGo[int8])
	case gpu.Int16:
		applyBytes(op, dst, src, intoGo[int16])
	case gpu.Int32:
		applyBytes(op, dst, src, intoGo[int32])
	case gpu.Int64:
		applyBytes(op, dst, src, intoGo[int64])
	case gpu.Uint8:
		applyBytes(op, dst, src, intoGo[uint8])
	}
}
