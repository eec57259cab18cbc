// Command asm generates the amd64 assembly kernels of package reduce with
// avo. It is its own module (the leading underscore keeps it out of the
// choreo module's builds); run it through `go generate` in package reduce:
//
//	go -C _asm run . -out ../kernels_amd64.s -stubs ../kernels_amd64_stubs.go -pkg reduce
package main

import (
	. "github.com/mmcloughlin/avo/build"
)

func main() {
	ConstraintExpr("amd64,!purego")
	for _, e := range elems {
		for _, f := range []form{{}, {to: true}} {
			for _, op := range ops {
				floatAVX2(e, op, f)
				floatAVX512(e, op, f)
			}
		}
	}
	halfKernels()
	Generate()
}
