package array

import (
	"github.com/choreo-gpu/choreo/gpu"
	"github.com/choreo-gpu/choreo/gpu/half"
)

// DType is an element type; the names and sizes are gpu's.
type DType = gpu.DType

// The element types.
const (
	Float32  = gpu.Float32
	Float64  = gpu.Float64
	Float16  = gpu.Float16
	BFloat16 = gpu.BFloat16
	Int8     = gpu.Int8
	Int16    = gpu.Int16
	Int32    = gpu.Int32
	Int64    = gpu.Int64
	Uint8    = gpu.Uint8
)

// ParseDType turns "float32", "bf16", ... into a DType.
func ParseDType(name string) (DType, error) { return gpu.ParseDType(name) }

// Element is the Go type of one element of some DType: float16 and bfloat16
// values are half.Float16 and half.BFloat16.
type Element interface {
	float32 | float64 | half.Float16 | half.BFloat16 | int8 | int16 | int32 | int64 | uint8
}

// DTypeOf returns the DType whose elements are T.
func DTypeOf[T Element]() DType {
	var z T
	switch any(z).(type) {
	case float32:
		return Float32
	case float64:
		return Float64
	case half.Float16:
		return Float16
	case half.BFloat16:
		return BFloat16
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	default:
		return Uint8
	}
}
