package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// unroll is how many vectors the main loop of every kernel handles per
// iteration.
const unroll = 4

// form is the shape of a float kernel: in place (dst[i] = dst[i] op
// src[i]) or into a third buffer (dst[i] = a[i] op b[i], the "To" kernels,
// which spare a copy of a before b is folded in).
type form struct {
	to bool
}

// signature is the Go signature of the form's kernels.
func (f form) signature(e elem) string {
	if f.to {
		return fmt.Sprintf("func(dst, a, b *%s, n int)", e.goTyp)
	}
	return fmt.Sprintf("func(dst, src *%s, n int)", e.goTyp)
}

// name is the kernel's name for op on e with the instruction set isa.
func (f form) name(e elem, op, isa string) string {
	if f.to {
		return op + e.name + "To" + isa
	}
	return op + e.name + isa
}

// expr is op written out over the form's operands, for doc comments.
func (f form) expr(op string) string {
	if f.to {
		return strings.NewReplacer("dst[i]", "a[i]", "src[i]", "b[i]").Replace(expr[op])
	}
	return expr[op]
}

// params loads the kernel's pointers: where it stores (dst), its left
// operand (a: dst itself in place) and its right one (src).
func (f form) params() (dst, a, src reg.Register) {
	dst = Load(Param("dst"), GP64())
	if !f.to {
		return dst, dst, Load(Param("src"), GP64())
	}
	return dst, Load(Param("a"), GP64()), Load(Param("b"), GP64())
}

// ptrs lists the distinct pointers the loops advance.
func ptrs(dst, a, src reg.Register) []reg.Register {
	if a == dst {
		return []reg.Register{src, dst}
	}
	return []reg.Register{src, a, dst}
}

// floatAVX2 generates <op><Elem>AVX2 (dst[i] = dst[i] op src[i] for i < n)
// or, for the To form, <op><Elem>ToAVX2 (dst[i] = a[i] op b[i]) with
// 256-bit vectors, an unrolled main loop, a one-vector loop and a scalar
// tail.
func floatAVX2(e elem, op string, f form) {
	name := f.name(e, op, "AVX2")
	TEXT(name, NOSPLIT, f.signature(e))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst[i] = %s for i < n (AVX2; NaN in, NaN out).", name, f.expr(op)))
	dst, a, src := f.params()
	n := Load(Param("n"), GP64())
	lanes := 32 / e.size

	// One vector step: load src and a, combine, store to dst.
	vec := func(d, s reg.VecVirtual, t reg.VecVirtual, off int) {
		e.movu(Mem{Base: src, Disp: off}, s)
		e.movu(Mem{Base: a, Disp: off}, d)
		combine(e, op, e.opP, e.cmpP, d, s, t)
		e.movu(d, Mem{Base: dst, Disp: off})
	}
	loops(e, name, ptrs(dst, a, src), n, lanes, func(k int) {
		for i := 0; i < k; i++ {
			vec(YMM(), YMM(), YMM(), i*32)
		}
	})

	Label(name + "_tail")
	CMPQ(n, Imm(0))
	JE(LabelRef(name + "_done"))
	d, s, t := XMM(), XMM(), XMM()
	e.movs(Mem{Base: src}, s)
	e.movs(Mem{Base: a}, d)
	combine(e, op, e.opS, e.cmpS, d, s, t)
	e.movs(d, Mem{Base: dst})
	for _, p := range ptrs(dst, a, src) {
		ADDQ(U32(e.size), p)
	}
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
// (body(1)), advancing the pointers ps and counting n down; it falls
// through to the label name+"_tail" with n < lanes elements left.
func loops(e elem, name string, ps []reg.Register, n reg.Register, lanes int, body func(k int)) {
	step := func(label string, k int) {
		Label(name + "_" + label)
		CMPQ(n, U32(k*lanes))
		JL(LabelRef(name + "_" + label + "_end"))
		body(k)
		for _, p := range ps {
			ADDQ(U32(k*lanes*e.size), p)
		}
		SUBQ(U32(k*lanes), n)
		JMP(LabelRef(name + "_" + label))
		Label(name + "_" + label + "_end")
	}
	step("unrolled", unroll)
	step("single", 1)
	JMP(LabelRef(name + "_tail"))
}

// floatAVX512 generates <op><Elem>AVX512 (or the To form's
// <op><Elem>ToAVX512): like floatAVX2 with 512-bit vectors and a masked
// final vector instead of a scalar tail. It needs AVX-512F and BMI2.
func floatAVX512(e elem, op string, f form) {
	name := f.name(e, op, "AVX512")
	TEXT(name, NOSPLIT, f.signature(e))
	Pragma("noescape")
	Doc(fmt.Sprintf("%s sets dst[i] = %s for i < n (AVX-512F, BMI2; NaN in, NaN out).", name, f.expr(op)))
	dst, a, src := f.params()
	n := Load(Param("n"), GP64())
	lanes := 64 / e.size

	// vec does one 512-bit step under mask m (nil: all lanes).
	vec := func(m reg.Register, off int) {
		d, s := ZMM(), ZMM()
		sm, am, dm := Mem{Base: src, Disp: off}, Mem{Base: a, Disp: off}, Mem{Base: dst, Disp: off}
		if m == nil {
			e.movu(sm, s)
			e.movu(am, d)
		} else {
			e.movuZ(sm, m, s)
			e.movuZ(am, m, d)
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
	loops(e, name, ptrs(dst, a, src), n, lanes, func(k int) {
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
