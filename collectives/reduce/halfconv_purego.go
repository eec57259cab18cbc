//go:build !amd64 || purego

package reduce

import "github.com/choreo-gpu/choreo/gpu"

// widenHalf widens the 16-bit elements of b into f (see widenHalfGo).
func widenHalf(dt gpu.DType, f []float32, b []byte) { widenHalfGo(dt, f, b) }

// narrowHalf rounds f into the 16-bit elements of b (see narrowHalfGo).
func narrowHalf(dt gpu.DType, b []byte, f []float32) { narrowHalfGo(dt, b, f) }
