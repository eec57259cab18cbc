//go:build amd64 && !purego

package reduce

// float32Into is the kernel behind Float32Into.
func float32Into(op Op, dst, src []float32) { float32IntoGo(op, dst, src) }

// float64Into is the kernel behind Float64Into.
func float64Into(op Op, dst, src []float64) { float64IntoGo(op, dst, src) }

// kernelName names the float kernels in use, for tests and benchmarks.
func kernelName() string { return "go" }
