//go:build amd64 && !purego

package reduce

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// kernelSet is one instruction set's float kernels, indexed by Op. Each
// kernel of f32 and f64 sets dst[i] = dst[i] op src[i] for i < n; each of
// f32to and f64to dst[i] = a[i] op b[i].
type kernelSet struct {
	name  string
	f32   [Max + 1]func(dst, src *float32, n int)
	f64   [Max + 1]func(dst, src *float64, n int)
	f32to [Max + 1]func(dst, a, b *float32, n int)
	f64to [Max + 1]func(dst, a, b *float64, n int)
}

// avx512Kernels need AVX-512F and BMI2.
var avx512Kernels = &kernelSet{
	name:  "avx512",
	f32:   [...]func(dst, src *float32, n int){Sum: sumFloat32AVX512, Prod: prodFloat32AVX512, Min: minFloat32AVX512, Max: maxFloat32AVX512},
	f64:   [...]func(dst, src *float64, n int){Sum: sumFloat64AVX512, Prod: prodFloat64AVX512, Min: minFloat64AVX512, Max: maxFloat64AVX512},
	f32to: [...]func(dst, a, b *float32, n int){Sum: sumFloat32ToAVX512, Prod: prodFloat32ToAVX512, Min: minFloat32ToAVX512, Max: maxFloat32ToAVX512},
	f64to: [...]func(dst, a, b *float64, n int){Sum: sumFloat64ToAVX512, Prod: prodFloat64ToAVX512, Min: minFloat64ToAVX512, Max: maxFloat64ToAVX512},
}

// avx2Kernels need AVX2.
var avx2Kernels = &kernelSet{
	name:  "avx2",
	f32:   [...]func(dst, src *float32, n int){Sum: sumFloat32AVX2, Prod: prodFloat32AVX2, Min: minFloat32AVX2, Max: maxFloat32AVX2},
	f64:   [...]func(dst, src *float64, n int){Sum: sumFloat64AVX2, Prod: prodFloat64AVX2, Min: minFloat64AVX2, Max: maxFloat64AVX2},
	f32to: [...]func(dst, a, b *float32, n int){Sum: sumFloat32ToAVX2, Prod: prodFloat32ToAVX2, Min: minFloat32ToAVX2, Max: maxFloat32ToAVX2},
	f64to: [...]func(dst, a, b *float64, n int){Sum: sumFloat64ToAVX2, Prod: prodFloat64ToAVX2, Min: minFloat64ToAVX2, Max: maxFloat64ToAVX2},
}

// supportedKernels lists the kernel sets this CPU can run, best first.
func supportedKernels() []*kernelSet {
	var ks []*kernelSet
	if cpu.X86.HasAVX512F && cpu.X86.HasBMI2 {
		ks = append(ks, avx512Kernels)
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, avx2Kernels)
	}
	return ks
}

// active is the kernel set in use, or nil for pure Go. It is chosen once
// at start-up from the CPU's features and never changes.
var active = func() *kernelSet {
	if ks := supportedKernels(); len(ks) > 0 {
		return ks[0]
	}
	return nil
}()

// float32Into is the kernel behind Float32Into; len(src) == len(dst).
func float32Into(op Op, dst, src []float32) {
	if active == nil || len(dst) == 0 {
		intoGo(op, dst, src)
		return
	}
	active.f32[op](unsafe.SliceData(dst), unsafe.SliceData(src), len(dst))
}

// float64Into is the kernel behind Float64Into; len(src) == len(dst).
func float64Into(op Op, dst, src []float64) {
	if active == nil || len(dst) == 0 {
		intoGo(op, dst, src)
		return
	}
	active.f64[op](unsafe.SliceData(dst), unsafe.SliceData(src), len(dst))
}

// float32To sets dst = a op b; the three have one length.
func float32To(op Op, dst, a, b []float32) {
	if active == nil || len(dst) == 0 {
		toGo(op, dst, a, b)
		return
	}
	active.f32to[op](unsafe.SliceData(dst), unsafe.SliceData(a), unsafe.SliceData(b), len(dst))
}

// float64To sets dst = a op b; the three have one length.
func float64To(op Op, dst, a, b []float64) {
	if active == nil || len(dst) == 0 {
		toGo(op, dst, a, b)
		return
	}
	active.f64to[op](unsafe.SliceData(dst), unsafe.SliceData(a), unsafe.SliceData(b), len(dst))
}

// kernelName names the float kernels in use, for tests and benchmarks.
func kernelName() string {
	if active == nil {
		return "go"
	}
	return active.name
}
