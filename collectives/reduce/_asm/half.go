package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// halfKernels generates the 16-bit conversions (16-bit sides are raw little-endian bytes) package reduce uses around
// its float32 kernels. Each handles the first n&^7 elements, eight at a time
// (the caller converts the remaining n%8 in Go):
//
//	widenFloat16F16C(dst *float32, src *byte, n int)   exact
//	narrowFloat16F16C(dst *byte, src *float32, n int)  nearest, ties to even
//	widenBFloat16AVX2(dst *float32, src *byte, n int)  exact
//	narrowBFloat16AVX2(dst *byte, src *float32, n int) nearest, ties to even; NaN stays a quiet NaN
func halfKernels() {
	eightLoop("widenFloat16F16C", "func(dst *float32, src *byte, n int)",
		"widenFloat16F16C widens n&^7 float16 bits from src to float32 in dst, exactly (F16C, AVX).",
		nil, func(dst, src reg.Register) {
			y := YMM()
			VCVTPH2PS(Mem{Base: src}, y)
			VMOVUPS(y, Mem{Base: dst})
		}, 2, 4)

	eightLoop("narrowFloat16F16C", "func(dst *byte, src *float32, n int)",
		"narrowFloat16F16C rounds n&^7 float32 from src to float16 bits in dst, to nearest, ties to even (F16C, AVX).",
		nil, func(dst, src reg.Register) {
			y := YMM()
			VMOVUPS(Mem{Base: src}, y)
			VCVTPS2PH(Imm(0), y, Mem{Base: dst}) // imm 0: round to nearest even
		}, 4, 2)

	eightLoop("widenBFloat16AVX2", "func(dst *float32, src *byte, n int)",
		"widenBFloat16AVX2 widens n&^7 bfloat16 bits from src to float32 in dst, exactly (AVX2).",
		nil, func(dst, src reg.Register) {
			y := YMM()
			VPMOVZXWD(Mem{Base: src}, y)
			VPSLLD(Imm(16), y, y)
			VMOVDQU(y, Mem{Base: dst})
		}, 2, 4)

	var one, bias, quiet reg.VecVirtual
	eightLoop("narrowBFloat16AVX2", "func(dst *byte, src *float32, n int)",
		"narrowBFloat16AVX2 rounds n&^7 float32 from src to bfloat16 bits in dst, to nearest, ties to even; a NaN keeps its top bits and is made quiet (AVX2).",
		func() {
			one, bias, quiet = broadcast(1), broadcast(0x7FFF), broadcast(0x40)
		}, func(dst, src reg.Register) {
			x, t, nan, q := YMM(), YMM(), YMM(), YMM()
			VMOVDQU(Mem{Base: src}, x)
			Comment("t = (x + 0x7FFF + ((x >> 16) & 1)) >> 16")
			VPSRLD(Imm(16), x, t)
			VPAND(one, t, t)
			VPADDD(bias, t, t)
			VPADDD(x, t, t)
			VPSRLD(Imm(16), t, t)
			Comment("NaN lanes take (x >> 16) | 0x40 instead.")
			VCMPPS(Imm(cmpUnord), x, x, nan)
			VPSRLD(Imm(16), x, q)
			VPOR(quiet, q, q)
			VBLENDVPS(nan, q, t, t)
			Comment("Pack the eight 32-bit lanes (each < 2^16) to 16 bits, in order.")
			hi, lo := XMM(), XMM()
			VEXTRACTI128(Imm(1), t, hi)
			VPACKUSDW(hi, t.AsX(), lo)
			VMOVDQU(lo, Mem{Base: dst})
		}, 4, 2)
}

// broadcast returns a YMM register holding c in every 32-bit lane.
func broadcast(c uint32) reg.VecVirtual {
	r, x, y := GP32(), XMM(), YMM()
	MOVL(U32(c), r)
	VMOVD(r, x)
	VPBROADCASTD(x, y)
	return y
}

// eightLoop emits a function that runs body over groups of eight elements
// while at least eight remain, advancing dst and src by eight elements of
// dstSize and srcSize bytes. setup, if not nil, runs once first.
func eightLoop(name, sig, doc string, setup func(), body func(dst, src reg.Register), srcSize, dstSize int) {
	TEXT(name, NOSPLIT, sig)
	Pragma("noescape")
	Doc(doc)
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	if setup != nil {
		setup()
	}
	Label(name + "_loop")
	CMPQ(n, U32(8))
	JL(LabelRef(name + "_done"))
	body(dst, src)
	ADDQ(U32(8*srcSize), src)
	ADDQ(U32(8*dstSize), dst)
	SUBQ(U32(8), n)
	JMP(LabelRef(name + "_loop"))
	Label(name + "_done")
	VZEROUPPER()
	RET()
}
