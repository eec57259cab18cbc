package main

import (
	"github.com/mmcloughlin/avo/build"
	"github.com/mmcloughlin/avo/operand"
)

// insn is an avo instruction constructor.
type insn func(ops ...operand.Op)

// elem describes one float element type: its name in function names, its
// size, and the packed (P) and scalar (S) instructions that work on it.
type elem struct {
	name  string
	size  int
	goTyp string
	movu  insn                     // unaligned packed move
	movuZ func(m, k, r operand.Op) // masked packed load, zeroing
	movs  insn                     // scalar move
	or    insn                     // packed bitwise or
	cmpP  insn                     // packed compare (imm8 predicate)
	cmpS  insn                     // scalar compare (imm8 predicate)
	addP  insn                     // packed add (used for NaN propagation under a mask)
	opP   map[string]insn
	opS   map[string]insn
}

// elems are the element types the float kernels are generated for.
var elems = []elem{
	{
		name: "Float32", size: 4, goTyp: "float32",
		movu: build.VMOVUPS, movuZ: build.VMOVUPS_Z, movs: build.VMOVSS, or: build.VORPS,
		cmpP: build.VCMPPS, cmpS: build.VCMPSS, addP: build.VADDPS,
		opP: map[string]insn{"sum": build.VADDPS, "prod": build.VMULPS, "min": build.VMINPS, "max": build.VMAXPS},
		opS: map[string]insn{"sum": build.VADDSS, "prod": build.VMULSS, "min": build.VMINSS, "max": build.VMAXSS},
	},
	{
		name: "Float64", size: 8, goTyp: "float64",
		movu: build.VMOVUPD, movuZ: build.VMOVUPD_Z, movs: build.VMOVSD, or: build.VORPD,
		cmpP: build.VCMPPD, cmpS: build.VCMPSD, addP: build.VADDPD,
		opP: map[string]insn{"sum": build.VADDPD, "prod": build.VMULPD, "min": build.VMINPD, "max": build.VMAXPD},
		opS: map[string]insn{"sum": build.VADDSD, "prod": build.VMULSD, "min": build.VMINSD, "max": build.VMAXSD},
	},
}

// ops are the reduce ops, by their reduce.Op names.
var ops = []string{"sum", "prod", "min", "max"}

// expr is each op written out, for the generated doc comments.
var expr = map[string]string{
	"sum":  "dst[i] + src[i]",
	"prod": "dst[i] * src[i]",
	"min":  "min(dst[i], src[i])",
	"max":  "max(dst[i], src[i])",
}

// isMinMax reports whether op needs the NaN fix-up: x86 MIN/MAX return
// their second source when either input is NaN, while package reduce
// promises NaN.
func isMinMax(op string) bool { return op == "min" || op == "max" }

// cmpUnord is the VCMPPS/VCMPPD predicate "unordered" (either is NaN).
const cmpUnord = 3

// title upper-cases the first letter of s.
func title(s string) string { return string(s[0]-'a'+'A') + s[1:] }
