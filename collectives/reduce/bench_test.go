package reduce

import (
	"fmt"
	"testing"

	"github.com/choreo-gpu/choreo/gpu"
)

// benchSizes are the byte sizes the float benchmarks run at: L1-resident,
// a ring all-reduce chunk (L2-resident), and far beyond the caches.
var benchSizes = []struct {
	name  string
	bytes int
}{{"4KiB", 4 << 10}, {"256KiB", 256 << 10}, {"64MiB", 64 << 20}}

// BenchmarkFloat32Sum measures Float32Into(Sum) in place next to a copy()
// of the same size (the memcpy baseline). Both report the array size per
// op as bytes, so their MB/s compare directly.
func BenchmarkFloat32Sum(b *testing.B) {
	for _, sz := range benchSizes {
		n := sz.bytes / 4
		dst, src := make([]float32, n), make([]float32, n)
		for i := range src {
			src[i], dst[i] = float32(i%7), 1 // touch every page before timing
		}
		b.Run(sz.name+"/Float32Into-"+kernelName(), func(b *testing.B) {
			b.SetBytes(int64(sz.bytes))
			for b.Loop() {
				Float32Into(Sum, dst, src)
			}
		})
		b.Run(sz.name+"/purego", func(b *testing.B) {
			b.SetBytes(int64(sz.bytes))
			for b.Loop() {
				intoGo(Sum, dst, src)
			}
		})
		b.Run(sz.name+"/memcpy", func(b *testing.B) {
			b.SetBytes(int64(sz.bytes))
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

// BenchmarkFloatOps measures every op on float64 and float32 at the ring
// chunk size and at 64 MiB.
func BenchmarkFloatOps(b *testing.B) {
	for _, sz := range benchSizes[1:] {
		d32, s32 := make([]float32, sz.bytes/4), make([]float32, sz.bytes/4)
		d64, s64 := make([]float64, sz.bytes/8), make([]float64, sz.bytes/8)
		for i := range d32 { // touch every page before timing
			d32[i], s32[i] = 1, 2
		}
		for i := range d64 {
			d64[i], s64[i] = 1, 2
		}
		for _, op := range Ops {
			b.Run(fmt.Sprintf("float32/%s/%s", op, sz.name), func(b *testing.B) {
				b.SetBytes(int64(sz.bytes))
				for b.Loop() {
					Float32Into(op, d32, s32)
				}
			})
			b.Run(fmt.Sprintf("float64/%s/%s", op, sz.name), func(b *testing.B) {
				b.SetBytes(int64(sz.bytes))
				for b.Loop() {
					Float64Into(op, d64, s64)
				}
			})
		}
	}
}

// BenchmarkInto measures the byte-level entry point for every dtype at the
// ring chunk size (256 KiB).
func BenchmarkInto(b *testing.B) {
	const size = 256 << 10
	dst, src := make([]byte, size), make([]byte, size)
	for _, dt := range gpu.DTypes {
		b.Run(dt.String(), func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				if err := Into(Sum, dt, dst, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkManyHalf measures Many over 2 and 4 sources of 256 KiB for the
// 16-bit types (float32 accumulation, one rounding) and, for comparison,
// float32. Bytes are the size of one buffer.
func BenchmarkManyHalf(b *testing.B) {
	const size = 256 << 10
	for _, dt := range []gpu.DType{gpu.Float16, gpu.BFloat16, gpu.Float32} {
		for _, k := range []int{2, 4} {
			srcs := make([][]byte, k)
			for i := range srcs {
				srcs[i] = make([]byte, size)
			}
			dst := make([]byte, size)
			b.Run(fmt.Sprintf("%s/k%d", dt, k), func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					if err := Many(Sum, dt, dst, srcs...); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
