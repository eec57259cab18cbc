package gpu

import (
	"fmt"
	"strings"
)

// DType is the element type of a buffer's contents. The zero value is
// Invalid; every valid DType has a fixed size in bytes.
type DType uint8

// The element types choreo supports.
const (
	Invalid DType = iota
	Float32
	Float64
	Float16
	BFloat16
	Int8
	Int16
	Int32
	Int64
	Uint8
)

// DTypes lists every valid DType, in declaration order.
var DTypes = []DType{Float32, Float64, Float16, BFloat16, Int8, Int16, Int32, Int64, Uint8}

var dtypeNames = [...]string{
	Invalid:  "invalid",
	Float32:  "float32",
	Float64:  "float64",
	Float16:  "float16",
	BFloat16: "bfloat16",
	Int8:     "int8",
	Int16:    "int16",
	Int32:    "int32",
	Int64:    "int64",
	Uint8:    "uint8",
}

var dtypeSizes = [...]int{
	Float32: 4, Float64: 8, Float16: 2, BFloat16: 2,
	Int8: 1, Int16: 2, Int32: 4, Int64: 8, Uint8: 1,
}

// Valid reports whether d is one of DTypes.
func (d DType) Valid() bool { return d > Invalid && int(d) < len(dtypeNames) }

// Size is the size of one element in bytes (0 for an invalid DType).
func (d DType) Size() int {
	if !d.Valid() {
		return 0
	}
	return dtypeSizes[d]
}

// IsFloat reports whether d is a floating-point type.
func (d DType) IsFloat() bool {
	return d == Float32 || d == Float64 || d == Float16 || d == BFloat16
}

// String returns the lower-case name of d ("float32", "bfloat16", ...).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType turns a name as printed by String (case-insensitive; "f32",
// "fp16", "bf16" and "half" are accepted too) into a DType.
func ParseDType(name string) (DType, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	switch n {
	case "f32", "fp32", "float":
		return Float32, nil
	case "f64", "fp64", "double":
		return Float64, nil
	case "f16", "fp16", "half":
		return Float16, nil
	case "bf16":
		return BFloat16, nil
	}
	for _, d := range DTypes {
		if dtypeNames[d] == n {
			return d, nil
		}
	}
	return Invalid, fmt.Errorf("gpu: unknown dtype %q: %w", name, ErrBadArgument)
}

// Wrap reduces v to d's width with two's-complement wrap-around, sign- or
// (for Uint8) zero-extended back to int64: what storing v in an element of
// an integer dtype keeps. Other dtypes return v unchanged.
func (d DType) Wrap(v int64) int64 {
	switch d {
	case Int8:
		return int64(int8(v))
	case Int16:
		return int64(int16(v))
	case Int32:
		return int64(int32(v))
	case Uint8:
		return int64(uint8(v))
	}
	return v
}
