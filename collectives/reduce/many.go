package reduce

import "github.com/choreo-gpu/choreo/gpu"

// manyBlock is the byte span Many reduces at a time, so that the block of
// dst being built stays in L1/L2 while every source is folded into it.
const manyBlock = 32 << 10

// Many sets dst[i] = srcs[0][i] op srcs[1][i] op ... op srcs[n-1][i]
// (applied left to right) for every element. len(srcs) >= 1; every buffer
// holds raw little-endian elements of dt and has len(dst) bytes, a multiple
// of dt.Size(). dst may be srcs[0] (the same slice) but must not overlap any
// other source or partially overlap srcs[0]; sources may overlap each other.
// For float16 and bfloat16 the op is applied in float32 and each element is
// rounded once, not len(srcs)-1 times. Bad input returns an error wrapping
// ErrBadOp or ErrBadArgument and leaves dst untouched.
func Many(op Op, dt gpu.DType, dst []byte, srcs ...[]byte) error {
	if err := checkOpType(op, dt); err != nil {
		return err
	}
	if len(srcs) == 0 {
		return badArg(op, dt, "no sources")
	}
	if err := checkMultiple(op, dt, "dst", dst); err != nil {
		return err
	}
	for k, s := range srcs {
		if len(s) != len(dst) {
			return badArg(op, dt, "dst has %d bytes, srcs[%d] %d", len(dst), k, len(s))
		}
		switch ov := Overlap(dst, s); {
		case ov == Partial, ov == Identical && k > 0:
			return badArg(op, dt, "dst overlaps srcs[%d]", k)
		}
	}
	if dt == gpu.Float16 || dt == gpu.BFloat16 {
		if len(srcs) == 1 {
			copy(dst, srcs[0])
			return nil
		}
		manyHalf(op, dt, dst, srcs)
		return nil
	}
	inPlace := Overlap(dst, srcs[0]) == Identical
	for off := 0; off < len(dst); off += manyBlock {
		end := min(off+manyBlock, len(dst))
		d, rest := dst[off:end], srcs[1:]
		switch {
		case inPlace:
		case len(srcs) > 1 && toBytes(op, dt, d, srcs[0][off:end], srcs[1][off:end]):
			rest = srcs[2:] // the first two in one pass
		default:
			copy(d, srcs[0][off:end])
		}
		for _, s := range rest {
			intoBytes(op, dt, d, s[off:end])
		}
	}
	return nil
}
