package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// unroll is how many vectors the main loop of every kernel handles per
// iteration.
const unroll = 4

// signature is the Go signature of every float kernel.
func signature(e elem) string {
	return fmt.Sprintf("func(dst, src *%s, n int)", e.goTyp)
}

// floatAVX2 generates <op><Elem>AVX2: dst[i] = dst[i] op src[i] for i < n
// with 256-bit vectors, an unrolled main loop, a one-vector loop and a
// scalar tail.
func floatAVX2(e elem, op string) {
	name := op + e.name + "AVX2"
	TEXT(name, NOSPLIT, signature(e))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst[i] = %s for i < n (AVX2; NaN in, NaN out).", name, expr[op]))
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	lanes := 32 / e.size

	// One vector step: load src and dst, combine, store.
	vec := func(d, s reg.VecVirtual, t reg.VecVirtual, off int) {
		e.movu(Mem{Base: src, Disp: off}, s)
		e.movu(Mem{Base: dst, Disp: off}, d)
		combine(e, op, e.opP, e.cmpP, d, s, t)
		e.movu(d, Mem{Base: dst, Disp: off})
	}
	loops(e, name, dst, src, n, lanes, func(k int) {
		for i := 0; i < k; i++ {
			vec(YMM(), YMM(), YMM(), i*32)
		}
	})

	Label(name + "_tail")
	CMPQ(n, Imm(0))
	JE(LabelRef(name + "_done"))
	d, s, t := XMM(), XMM(), XMM()
	e.movs(Mem{Base: src}, s)
	e.movs(Mem{Base: dst}, d)
	combine(e, op, e.opS, e.cmpS, d, s, t)
	e.movs(d, Mem{Base: dst})
	ADDQ(U32(e.size), src)
	ADDQ(U32(e.size), dst)
	DECQ(n)
	JMP(LabelRef(name + "_tail"))

	Label(name + "_done")
	VZEROUPPER()
	RET()
}

// combine sets d = d op s in registers; t is scratch. For min/max a lane
// where either input is NaN is set to all ones, which is a NaN.
func combine(e elem, op string, ins map[string]insn, cmp insn, d, s, t reg.VecVirtual) {
	if !isMinMax(op) {
		ins[op](s, d, d)
		return
	}
	cmp(Imm(cmpUnord), s, d, t)
	ins[op](s, d, d)
	e.or(t, d, d)
}

// loops emits the unrolled loop (body(unroll)) and the one-vector loop
// (body(1)), advancing dst and src and counting n down; it falls through to
// the label name+"_tail" with n < lanes elements left.
func loops(e elem, name string, dst, src, n reg.Register, lanes int, body func(k int)) {
	step := func(label string, k int) {
		Label(name + "_" + label)
		CMPQ(n, U32(k*lanes))
		JL(LabelRef(name + "_" + label + "_end"))
		body(k)
		ADDQ(U32(k*lanes*e.size), src)
		ADDQ(U32(k*lanes*e.size), dst)
		SUBQ(U32(k*lanes), n)
		JMP(LabelRef(name + "_" + label))
		Label(name + "_" + label + "_end")
	}
	step("unrolled", unroll)
	step("single", 1)
	JMP(LabelRef(name + "_tail"))
}

// floatAVX512 generates <op><Elem>AVX512: like floatAVX2 with 512-bit
// vectors and a masked final vector instead of a scalar tail. It needs
// AVX-512F and BMI2.
func floatAVX512(e elem, op string) {
	name := op + e.name + "AVX512"
	TEXT(name, NOSPLIT, signature(e))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst[i] = %s for i < n (AVX-512F, BMI2; NaN in, NaN out).", name, expr[op]))
	dst := Load(Param("dst"), GP64())
	src := Load(Param("src"), GP64())
	n := Load(Param("n"), GP64())
	lanes := 64 / e.size

	// vec does one 512-bit step under mask m (nil: all lanes).
	vec := func(m reg.Register, off int) {
		d, s := ZMM(), ZMM()
		sm, dm := Mem{Base: src, Disp: off}, Mem{Base: dst, Disp: off}
		if m == nil {
			e.movu(sm, s)
			e.movu(dm, d)
		} else {
			e.movuZ(sm, m, s)
			e.movuZ(dm, m, d)
		}
		if isMinMax(op) {
			// Where either lane is NaN, replace the MIN/MAX result by
			// d + s, which is NaN there.
			nan := K()
			e.cmpP(Imm(cmpUnord), s, d, nan)
			r := ZMM()
			e.opP[op](s, d, r)
			e.addP(s, d, nan, r)
			d = r
		} else {
			e.opP[op](s, d, d)
		}
		if m == nil {
			e.movu(d, dm)
		} else {
			e.movu(d, m, dm)
		}
	}
	loops(e, name, dst, src, n, lanes, func(k int) {
		for i := 0; i < k; i++ {
			vec(nil, i*64)
		}
	})

	Label(name + "_tail")
	CMPQ(n, Imm(0))
	JE(LabelRef(name + "_done"))
	Comment("Mask of the n < lanes remaining elements: the low n bits.")
	bits := GP64()
	MOVQ(I32(-1), bits)
	BZHIQ(n, bits, bits)
	m := K()
	KMOVW(bits.As32(), m)
	vec(m, 0)

	Label(name + "_done")
	VZEROUPPER()
	RET()
}
