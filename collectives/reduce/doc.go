// Package reduce holds the CPU reduction kernels the collectives run on host
// memory: dst[i] = dst[i] op src[i] (Into) and dst[i] = s0[i] op s1[i] op ...
// (Many), for every reduce op (Sum, Prod, Min, Max) and every gpu.DType.
//
// Buffers are raw little-endian element bytes. Integers wrap (two's
// complement). Float Min and Max return NaN when either operand is NaN; the
// sign of a zero result of Min/Max(+0, -0) is unspecified. float16 and
// bfloat16 are widened to float32, computed, and rounded once per element
// (per call for Into, per element over all inputs for Many).
//
// Many writes its first two float32 or float64 sources into dst in one
// pass (dst[i] = s0[i] op s1[i]) rather than copying s0 and folding s1 in.
//
// On amd64 float32 and float64 run through AVX-512 or AVX2 assembly, and
// the float16/bfloat16 conversions through F16C/AVX2 assembly, all
// generated with avo (see _asm, a module of its own; `go generate`), chosen
// once at start-up from the CPU's features. The pure-Go kernels are used on
// other architectures, on CPUs without those features, and under the
// purego build tag.
package reduce
